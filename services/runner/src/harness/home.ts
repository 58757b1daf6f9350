import { constants } from 'node:fs';
import { chown, lstat, mkdir, open, readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';

// The harness's home as the runner tends it before a harness process starts: what the agent left
// there for the start to read goes, and whether a session was recorded is looked up. The home is
// writable by the agent's commands, so nothing here follows a link, reads anything but a regular
// file, or reads more than a bounded part of one. Nothing of the sandbox runs meanwhile (the
// harness before was stopped, jail or pod swept). The local home is on this machine's disk; a
// pod's is tended through execs (sandbox/kubernetes/process.ts).

/** Files a lookup answers at most. */
export const FOUND_MAX = 100;
/** How much of a file's beginning is read for its first line. */
export const FIRST_LINE_MAX_BYTES = 1 << 20;

export interface HarnessHome {
  /** Removes `path` whatever it is (a link is removed, not followed). */
  remove(path: string): Promise<void>;
  /** Makes `dir` a directory of the sandbox's owner; whatever else is at that path (a link) goes first. */
  directory(dir: string, owner: number | null): Promise<void>;
  /** Removes everything in `dir` but the entries named in `keep`. */
  clearBut(dir: string, keep: readonly string[]): Promise<void>;
  /**
   * Regular files below `dir` (not through a link, `dir` included) whose names end in `suffix`,
   * as paths relative to `dir`; at most FOUND_MAX. None when `dir` is not a directory.
   */
  find(dir: string, suffix: string): Promise<string[]>;
  /** The first whole line of a regular file (a link or FIFO is none), within FIRST_LINE_MAX_BYTES; null if none. */
  firstLine(file: string): Promise<string | null>;
}

/** The first line of `text`, if one is whole in it. */
export function wholeFirstLine(text: string): string | null {
  const end = text.indexOf('\n');
  return end < 0 ? null : text.slice(0, end);
}

/** A name suffix looked for: plain characters only, since a pod's `find` takes it as a pattern. */
export function checkSuffix(suffix: string): string {
  if (!/^[A-Za-z0-9._-]{1,200}$/.test(suffix)) throw new Error(`not a file name suffix: ${JSON.stringify(suffix)}`);
  return suffix;
}

export const localHome: HarnessHome = {
  remove: (path) => rm(path, { force: true, recursive: true }),

  async directory(dir, owner) {
    const found = await lstat(dir).catch(() => null);
    if (found && !found.isDirectory()) await rm(dir, { force: true, recursive: true });
    await mkdir(dir, { recursive: true });
    if (owner !== null) await chown(dir, owner, owner);
  },

  async clearBut(dir, keep) {
    const found = await lstat(dir).catch(() => null);
    if (!found?.isDirectory()) return;
    const entries = await readdir(dir);
    await Promise.all(
      entries
        .filter((name) => !keep.includes(name))
        .map((name) => rm(join(dir, name), { recursive: true, force: true })),
    );
  },

  async find(dir, suffix) {
    checkSuffix(suffix);
    const found: string[] = [];
    // Not through a link the agent may have put there (to `/`, say), at any depth: entries are
    // looked at as they are (a directory entry that is a link is a link, not a directory).
    const walk = async (rel: string): Promise<void> => {
      let entries;
      try {
        entries = await readdir(join(dir, rel), { withFileTypes: true });
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        if (code === 'ENOENT' || code === 'ENOTDIR') return;
        throw err;
      }
      for (const entry of entries) {
        if (found.length >= FOUND_MAX) return;
        const path = rel === '' ? entry.name : `${rel}/${entry.name}`;
        if (entry.isDirectory()) await walk(path);
        else if (entry.isFile() && entry.name.endsWith(suffix)) found.push(path);
      }
    };
    const top = await lstat(dir).catch(() => null);
    if (top?.isDirectory()) await walk('');
    return found;
  },

  async firstLine(file) {
    let handle;
    try {
      handle = await open(file, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ELOOP' || code === 'ENOENT') return null;
      throw err;
    }
    try {
      if (!(await handle.stat()).isFile()) return null;
      const buffer = Buffer.alloc(FIRST_LINE_MAX_BYTES);
      const { bytesRead } = await handle.read(buffer, 0, buffer.length, 0);
      return wholeFirstLine(buffer.subarray(0, bytesRead).toString('utf8'));
    } finally {
      await handle.close();
    }
  },
};

import { constants } from 'node:fs';
import { lstat, open, readdir } from 'node:fs/promises';
import { join } from 'node:path';

/**
 * Whether Codex ever recorded the session: it writes one rollout file per thread, named after the
 * thread's id, under `sessions/` (or `archived_sessions/`) of its home, once the thread's first turn
 * has begun, the session's metadata as its first line. A thread lost before that line was whole
 * (no file, an empty one, a line cut short) has nothing to resume.
 */
export async function hasRollout(home: string, threadId: string): Promise<boolean> {
  for (const dir of ['sessions', 'archived_sessions']) {
    let names: string[];
    try {
      // Not through a link the agent may have put there (to `/`, say): the walk below would follow it.
      if (!(await lstat(join(home, dir))).isDirectory()) continue;
      names = await readdir(join(home, dir), { recursive: true });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') continue;
      throw err;
    }
    for (const name of names.filter((n) => n.endsWith(`-${threadId}.jsonl`))) {
      if (await startsWithWholeLine(join(home, dir, name))) return true;
    }
  }
  return false;
}

/**
 * Whether a JSON-lines file begins with a complete line that parses. The harness's home is
 * writable from the jail: a link is not followed (it could name any file of the runner's), and
 * anything but a regular file (a FIFO would block the read for good) is no rollout.
 */
async function startsWithWholeLine(file: string): Promise<boolean> {
  let handle;
  try {
    handle = await open(file, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ELOOP') return false;
    throw err;
  }
  try {
    if (!(await handle.stat()).isFile()) return false;
    const buffer = Buffer.alloc(1 << 20);
    const { bytesRead } = await handle.read(buffer, 0, buffer.length, 0);
    const text = buffer.subarray(0, bytesRead).toString('utf8');
    const end = text.indexOf('\n');
    if (end < 0) return false;
    JSON.parse(text.slice(0, end));
    return true;
  } catch (err) {
    if (err instanceof SyntaxError) return false;
    throw err;
  } finally {
    await handle.close();
  }
}

import { execFile } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { readFileSync, realpathSync, statSync } from 'node:fs';
import { chmod, chown, link, lstat, mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { git } from './git.js';

// Where the runner runs as root, a jail's processes are not root outside it: each sandbox has an
// unprivileged uid of its own (gid the same, no supplementary groups) from SANDBOX_UID_RANGE, which
// its jail runs as (jail.ts) and which owns what the agent may write (its workspaces, the harness's
// home, its HOME). An agent that got out of its jail (a kernel bug, a mistake in what is bound in)
// would be that user: not root, not the runner, and not the owner of another sandbox's files.
//
// A sandbox keeps its uid across runs, runner restarts and takeovers: it is recorded in the
// sandbox's state, and claimed in `<SANDBOX_ROOT>/.uids/<uid>` (a file naming the sandbox's folder,
// created exclusively, so two runners sharing the disk never hand one uid to two sandboxes). A new
// sandbox starts looking at a uid derived from its folder's name and takes the first free one.
// The range's last uid is never a sandbox's: the runner's start-up probes run as it.

const run = promisify(execFile);

const CLAIMS = '.uids';

export interface UidRange {
  first: number;
  last: number;
}

/** `first-last` as a range, or why it is not one a sandbox's uids may come from. */
export function parseUidRange(text: string): UidRange | string {
  const m = /^\s*(\d{1,10})\s*-\s*(\d{1,10})\s*$/.exec(text);
  if (!m) return `"${text}" is not first-last (e.g. 200000-265535)`;
  const range = { first: Number(m[1]), last: Number(m[2]) };
  if (range.first < 1000) return 'must start at 1000 or above: below are the system’s own users';
  if (range.last > 2 ** 31 - 2) return 'must end below 2147483647';
  if (range.last - range.first < 1) return 'must hold at least two uids (the last is the runner’s for its probes)';
  if (range.first <= 65534 && range.last >= 65534) return 'must not hold 65534 (nobody)';
  return range;
}

/** The uid the runner's start-up probes run as: the range's last, never a sandbox's. */
export const probeUid = (range: UidRange): number => range.last;

/**
 * Why the range cannot be switched to in this process's user namespace (a container's maps only
 * part of the ids: 0-65535 in a Kubernetes pod with `hostUsers: false`), or null when it can.
 */
export function unmappedProblem(range: UidRange): string | null {
  for (const kind of ['uid', 'gid'] as const) {
    let lines: string[];
    try {
      lines = readFileSync(`/proc/self/${kind}_map`, 'utf8').trim().split('\n');
    } catch {
      continue;
    }
    const maps = lines.map((line) => line.trim().split(/\s+/).map(Number) as [number, number, number]);
    const covered = maps.some(([inside, , count]) => inside <= range.first && range.last < inside + count);
    if (!covered) {
      const shown = maps.map(([inside, , count]) => `${inside}-${inside + count - 1}`).join(', ');
      return `SANDBOX_UID_RANGE ${range.first}-${range.last} is not within the ${kind}s this user namespace maps (${shown})`;
    }
  }
  return null;
}

/**
 * Who else on this machine has ids of the range (a user of /etc/passwd, a subordinate range of
 * /etc/subuid or /etc/subgid, for rootless containers): sharing a uid with a sandbox, they would
 * share its files. Empty when none.
 */
export function rangeOverlaps(range: UidRange): string[] {
  const read = (file: string) => {
    try {
      return readFileSync(file, 'utf8').split('\n').filter(Boolean);
    } catch {
      return [];
    }
  };
  const inRange = (first: number, count: number) => first <= range.last && range.first < first + count;
  const found: string[] = [];
  for (const line of read('/etc/passwd')) {
    const [name, , uid] = line.split(':');
    if (inRange(Number(uid), 1)) found.push(`user ${name} (${uid})`);
  }
  for (const file of ['/etc/subuid', '/etc/subgid']) {
    for (const line of read(file)) {
      const [name, first, count] = line.split(':');
      if (inRange(Number(first), Number(count))) found.push(`${file} of ${name} (${first}+${count})`);
    }
  }
  return found;
}

/** Whether a user who is neither owner nor group of them may pass through `dir` and every directory above it. */
export function passableByOthers(dir: string): boolean {
  try {
    for (let at = realpathSync(dir); ; at = dirname(at)) {
      if (!(statSync(at).mode & 0o001)) return false;
      if (at === '/') return true;
    }
  } catch {
    return false;
  }
}

/**
 * Whether such a user (a sandbox's uid, for the runner's files) can reach `path`: pass through
 * every directory above it, and read it (and search it, for a directory).
 */
export function reachableByOthers(path: string): boolean {
  try {
    const real = realpathSync(path);
    const stat = statSync(real);
    const readable = (stat.mode & 0o004) !== 0 && (!stat.isDirectory() || (stat.mode & 0o001) !== 0);
    return readable && passableByOthers(dirname(real));
  } catch {
    return false;
  }
}

/** What a root runner does to sandboxes of their own uids: hand files over, reach into them, signal and become that uid. */
const CAPABILITIES = { CHOWN: 0, DAC_OVERRIDE: 1, FOWNER: 3, KILL: 5, SETGID: 6, SETUID: 7 } as const;

/** The capabilities this process lacks to run jails as uids of their own (a container's root may have few); empty where none. */
export function missingCapabilities(): string[] {
  let effective: bigint;
  try {
    const hex = /^CapEff:\s*([0-9a-f]+)$/m.exec(readFileSync('/proc/self/status', 'utf8'))?.[1];
    if (!hex) return [];
    effective = BigInt(`0x${hex}`);
  } catch {
    return [];
  }
  return Object.entries(CAPABILITIES)
    .filter(([, bit]) => !(effective & (1n << BigInt(bit))))
    .map(([name]) => `CAP_${name}`);
}

export class SandboxUids {
  constructor(
    private readonly root: string,
    private readonly range: UidRange,
  ) {}

  /** How many uids sandboxes may have (the range less the probes' one). */
  private get size(): number {
    return this.range.last - this.range.first;
  }

  /**
   * The sandbox's uid: the one recorded with it if it is still its own, else one claimed for it now
   * (a claim made for it before, whose recording was lost, is found again). Throws when every uid
   * of the range is taken.
   */
  async claim(folder: string, recorded: number | undefined): Promise<number> {
    const claims = join(this.root, CLAIMS);
    await mkdir(claims, { recursive: true, mode: 0o700 });
    const own = (uid: number) => uid >= this.range.first && uid < this.range.last;
    if (recorded !== undefined && own(recorded) && (await this.holder(recorded)) === folder) return recorded;
    const start = createHash('sha256').update(folder).digest().readUInt32BE(0) % this.size;
    for (let i = 0; i < this.size; i++) {
      const uid = this.range.first + ((start + i) % this.size);
      if (await this.tryClaim(uid, folder)) return uid;
      if ((await this.holder(uid)) === folder) return uid;
    }
    throw new Error(`every uid of SANDBOX_UID_RANGE ${this.range.first}-${this.range.last} has a sandbox`);
  }

  /** Frees `uid` if `folder` holds it: the folder is gone, and nothing of the uid's runs or is left on disk. */
  async release(uid: number, folder: string): Promise<void> {
    if ((await this.holder(uid)) === folder) await rm(join(this.root, CLAIMS, String(uid)), { force: true });
  }

  /** Claims `uid` for `folder` unless it is claimed: written aside and linked in, never seen half-written. */
  private async tryClaim(uid: number, folder: string): Promise<boolean> {
    const file = join(this.root, CLAIMS, String(uid));
    const aside = join(this.root, CLAIMS, `.${uid}-${randomBytes(6).toString('hex')}`);
    await writeFile(aside, `${folder}\n`, { flag: 'wx', mode: 0o600 });
    try {
      await link(aside, file);
      return true;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'EEXIST') return false;
      throw err;
    } finally {
      await rm(aside, { force: true });
    }
  }

  private async holder(uid: number): Promise<string | null> {
    try {
      return (await readFile(join(this.root, CLAIMS, String(uid)), 'utf8')).trim();
    } catch {
      return null;
    }
  }
}

/**
 * Gives `path` and everything below it to `uid` (and its gid). GNU chown walks the tree without
 * following a symbolic link (`-h`, and `-R` without `-L`), through descriptors, so a link or a
 * directory swapped in meanwhile cannot send it elsewhere.
 */
export async function handOver(paths: readonly string[], uid: number): Promise<void> {
  if (paths.length === 0) return;
  await run('chown', ['-hR', `${uid}:${uid}`, '--', ...paths], { maxBuffer: 1024 * 1024 });
}

/**
 * Makes `dir` (a workspace, the harness's home, the agent's HOME) `uid`'s: nothing to do when it
 * is already; else (a sandbox from before, or one whose uid changed) everything in it is handed
 * over first and the directory itself last, so a directory found owned is owned whole.
 */
export async function ensureOwned(dir: string, uid: number): Promise<void> {
  const stat = await lstat(dir);
  if (stat.uid === uid && stat.gid === uid) return;
  if (!stat.isDirectory()) throw new Error(`${dir} is not a directory`);
  const entries = (await readdir(dir)).map((name) => join(dir, name));
  for (let i = 0; i < entries.length; i += 500) await handOver(entries.slice(i, i + 500), uid);
  await chown(dir, uid, uid);
}

/**
 * Keeps the runner's git directory of a workspace the runner's: root's, unreadable to the
 * sandbox's uid but for its objects, which the jail shows read-only (the agent's repository
 * borrows them). The git directory may be passed through (mode 0711) but not listed; everything in
 * it is its owner's alone but `objects/`, which belongs to the sandbox's group (setgid
 * directories, so what git adds there stays the group's) and is readable by it. Git keeps new files
 * that way (`core.sharedRepository=0640`: owner read-write, group read, nobody else). Done once per
 * directory and uid: cheap to call every run.
 */
export async function secureGitDir(gitDir: string, uid: number): Promise<void> {
  const objects = join(gitDir, 'objects');
  const [top, objectsStat] = await Promise.all([lstat(gitDir), lstat(objects)]);
  const done = (top.mode & 0o7777) === 0o711 && objectsStat.gid === uid && (objectsStat.mode & 0o7777) === 0o2750;
  if (done) return;
  await git(gitDir, ['config', 'core.sharedRepository', '0640'], { repo: { gitDir, workTree: null } });
  await run('chmod', ['-R', 'go-rwx', '--', gitDir]);
  await chown(objects, 0, uid);
  await chmod(objects, 0o2750);
  for (const entry of await readdir(objects, { recursive: true, withFileTypes: true })) {
    const path = join(entry.parentPath, entry.name);
    if (entry.isSymbolicLink()) continue;
    await chown(path, 0, uid);
    await chmod(path, entry.isDirectory() ? 0o2750 : 0o440);
  }
  await chmod(gitDir, 0o711);
}

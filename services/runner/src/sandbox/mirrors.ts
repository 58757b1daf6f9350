import { createHash, randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { lstat, mkdir, readdir, rename, rm, utimes } from 'node:fs/promises';
import { join } from 'node:path';
import { OneAtATime, type Logger } from '@threadwork/platform';
import { revision } from './agent-repo.js';
import { git, type RemoteAccess } from './git.js';

// The runner's mirror of each repository it works: the base branches as its sandboxes last
// fetched them from the remote. A new sandbox's clone takes what the mirror has by a local fetch
// and asks the remote for what is new only; a spare sandbox (warm.ts) is cloned from the mirror
// alone, with no token and no remote.
//
// A mirror holds what the remote served and nothing of any agent's: what comes in is
// `refs/remotes/origin/<base>` of a runner git directory — a ref only the runner's fetches from the
// remote set, which reaches nothing the runner committed of an agent's work — and objects are
// named by their content. Mirrors live in `<SANDBOX_ROOT>/.mirrors/`, the runner's alone (0700):
// no jail shows them. A mirror is a cache: losing one costs a clone, nothing else. So one that no
// sandbox was cloned from or brought news to for SANDBOX_MIRROR_IDLE_MS goes (`sweep`), and the
// disk holds the repositories the runner works now, not every one it ever did.

const MIRRORS = '.mirrors';
const MIRROR = /^[0-9a-f]{32}\.git$/;
/** A mirror on its way in (fetchInto), or on its way out (sweep). */
const PASSING = /^([0-9a-f]{32}\.git)\.(?:partial|gone)-[0-9a-f]{8}$/;
/** How old such a leftover must be before a sweep takes it for one of a runner that is gone. */
const LEFT_BEHIND_MS = 60 * 60_000;

/** A repository as a mirror knows it: the id and URL of the job's (tests give repositories one id). */
export interface MirroredRepo {
  repository_id: number;
  clone_url: string;
}

export class RepositoryMirrors {
  /** Updates of each mirror, one after the other. */
  private readonly updates = new OneAtATime();

  constructor(
    private readonly root: string,
    private readonly logger: Logger,
  ) {}

  /** Where the mirror of `repo` is (whether or not there is one yet). */
  path(repo: MirroredRepo): string {
    const name = createHash('sha256').update(`${repo.repository_id}\n${repo.clone_url}`).digest('hex').slice(0, 32);
    return join(this.root, MIRRORS, `${name}.git`);
  }

  /** The mirror as a remote to fetch from: a local path, no token. */
  remote(repo: MirroredRepo): RemoteAccess {
    return { url: `file://${this.path(repo)}`, token: null };
  }

  /** The revision of `branch` in the mirror; null when the mirror has none (or there is no mirror). */
  async revision(repo: MirroredRepo, branch: string): Promise<string | null> {
    const gitDir = this.path(repo);
    if (!existsSync(gitDir)) return null;
    return revision(this.root, { gitDir, workTree: null }, `refs/heads/${branch}`);
  }

  /** A sandbox is cloned from the mirror of `repo` (if there is one): it is in use, and stays. */
  async used(repo: MirroredRepo): Promise<void> {
    const now = new Date();
    await utimes(this.path(repo), now, now).catch(() => undefined);
  }

  /**
   * Removes the mirrors no sandbox used for `idleMs` (by their time of last use, `used` or an
   * update), and what a runner that died left of one on its way in or out; not one with an update
   * under way. Answers how many mirrors went.
   */
  async sweep(idleMs: number): Promise<number> {
    const dir = join(this.root, MIRRORS);
    const names = await readdir(dir).catch(() => [] as string[]);
    const before = Date.now() - idleMs;
    let removed = 0;
    for (const name of names) {
      const path = join(dir, name);
      const passing = PASSING.exec(name);
      if (passing) {
        // Not one of this runner's under way; one of a runner that is gone is an hour old.
        if (this.updates.busy(join(dir, passing[1]!))) continue;
        const stat = await lstat(path).catch(() => null);
        if (stat && stat.mtimeMs < Date.now() - LEFT_BEHIND_MS) await rm(path, { recursive: true, force: true });
        continue;
      }
      if (!MIRROR.test(name) || this.updates.busy(path)) continue;
      const stat = await lstat(path).catch(() => null);
      if (!stat?.isDirectory() || stat.mtimeMs >= before) continue;
      // Out of its place at once, so no clone finds it half removed.
      const gone = `${path}.gone-${randomBytes(4).toString('hex')}`;
      const out = await rename(path, gone).then(
        () => true,
        () => false,
      );
      if (!out) continue;
      await rm(gone, { recursive: true, force: true });
      removed += 1;
    }
    return removed;
  }

  /**
   * Brings `branch` into the mirror as the runner git directory `gitDir` last fetched it from the
   * remote (its `refs/remotes/origin/<branch>`). Updates of one mirror run one at a time; a failed
   * one is logged and forgotten.
   */
  update(repo: MirroredRepo, gitDir: string, branch: string): Promise<void> {
    const mirror = this.path(repo);
    return this.updates
      .run(mirror, () => this.fetchInto(mirror, gitDir, branch))
      .catch((err: unknown) => {
        this.logger.warn({ err, repository_id: repo.repository_id }, 'the repository mirror could not be updated');
      });
  }

  /** Resolves once no update is under way (the runner stops). */
  idle(): Promise<void> {
    return this.updates.idle();
  }

  private async fetchInto(mirror: string, gitDir: string, branch: string): Promise<void> {
    const from: RemoteAccess = { url: `file://${gitDir}`, token: null };
    const refspec = `+refs/remotes/origin/${branch}:refs/heads/${branch}`;
    if (existsSync(mirror)) {
      await git(this.root, ['fetch', '--quiet', '--no-tags', '--', from.url, refspec], {
        repo: { gitDir: mirror, workTree: null },
        remote: from,
      });
      const now = new Date();
      await utimes(mirror, now, now);
      return;
    }
    // Made aside and moved in place: a mirror half made is never read.
    await mkdir(join(this.root, MIRRORS), { recursive: true, mode: 0o700 });
    const partial = `${mirror}.partial-${randomBytes(4).toString('hex')}`;
    try {
      await git(this.root, ['init', '--quiet', '--bare', '--', partial]);
      await git(this.root, ['fetch', '--quiet', '--no-tags', '--', from.url, refspec], {
        repo: { gitDir: partial, workTree: null },
        remote: from,
      });
      await rename(partial, mirror);
    } finally {
      await rm(partial, { recursive: true, force: true });
    }
  }
}

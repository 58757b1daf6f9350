import { createHash, randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, rename, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from '@threadwork/platform';
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
// no jail shows them. A mirror is a cache: losing one costs a clone, nothing else.

const MIRRORS = '.mirrors';

/** A repository as a mirror knows it: the id and URL of the job's (tests give repositories one id). */
export interface MirroredRepo {
  repository_id: number;
  clone_url: string;
}

export class RepositoryMirrors {
  /** Updates of each mirror, one after the other. */
  private readonly queues = new Map<string, Promise<void>>();

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

  /**
   * Brings `branch` into the mirror as the runner git directory `gitDir` last fetched it from the
   * remote (its `refs/remotes/origin/<branch>`). Updates of one mirror run one at a time; a failed
   * one is logged and forgotten.
   */
  update(repo: MirroredRepo, gitDir: string, branch: string): Promise<void> {
    const mirror = this.path(repo);
    const previous = this.queues.get(mirror) ?? Promise.resolve();
    const next = previous
      .then(() => this.fetchInto(mirror, gitDir, branch))
      .catch((err: unknown) => {
        this.logger.warn({ err, repository_id: repo.repository_id }, 'the repository mirror could not be updated');
      });
    this.queues.set(mirror, next);
    void next.then(() => {
      if (this.queues.get(mirror) === next) this.queues.delete(mirror);
    });
    return next;
  }

  /** Resolves once no update is under way (the runner stops). */
  async idle(): Promise<void> {
    while (this.queues.size > 0) await Promise.all(this.queues.values());
  }

  private async fetchInto(mirror: string, gitDir: string, branch: string): Promise<void> {
    const from: RemoteAccess = { url: `file://${gitDir}`, token: null };
    const refspec = `+refs/remotes/origin/${branch}:refs/heads/${branch}`;
    if (existsSync(mirror)) {
      await git(this.root, ['fetch', '--quiet', '--no-tags', '--', from.url, refspec], {
        repo: { gitDir: mirror, workTree: null },
        remote: from,
      });
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

import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, rename, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { RunRepository } from '@threadwork/contracts';
import type { Logger } from '@threadwork/platform';
import { agentRepoFingerprint, makeAgentRepo, revision } from './agent-repo.js';
import { git, remoteRevisions, type RemoteAccess, type RemoteSeen } from './git.js';
import { EMPTY_TREE, gitDirOf, threadBranch, type RepoState } from './local-state.js';
import { SandboxError, type SandboxFence } from './provider.js';
import { ensureOwned, handOver, secureGitDir } from './uids.js';

// The `local` provider's workspaces: each repository of a sandbox cloned, refreshed and handed to
// the agent for a run (local.ts keeps the sandbox around them).

/** Where a new clone keeps what it took from the mirror until the remote's base is known to reach it. */
const SEED_REF = 'refs/threadwork/seed';

/** The mirror's base is not in the remote's base's history: the clone is made again without it. */
class SeedDiverged extends Error {}

export interface PrepareRepoOptions {
  root: string;
  folder: string;
  repo: RunRepository;
  threadId: string;
  known: RepoState | undefined;
  remote: RemoteAccess;
  take: SandboxFence;
  owner: number | null;
  logger: Logger;
  agentRepo?: boolean;
  /** What `ls-remote` of the remote answered moments ago, in this preparation: not asked again. */
  seen?: RemoteSeen;
  /** A local copy of the repository (the runner's mirror) a new clone takes what it has from first. */
  seed?: RemoteAccess;
  /**
   * The fingerprint of the agent's repository as the runner made it after the last turn, no turn
   * having come since: kept if it still has it and the base does not move.
   */
  agentRepoAtRest?: string;
}

export interface PreparedRepo {
  state: RepoState;
  /** The remote's thread-branch revision now (null: none), which the run's push leases against. */
  start: string | null;
  /** Whether the base came from the remote just now (a clone, or a base that moved): news for the mirror. */
  fetched: boolean;
}

/**
 * One repository of the sandbox, ready for a run: cloned on first use (the thread branch from the
 * remote's thread branch when a sandbox elsewhere pushed one, else from the requested base),
 * refreshed later (the base fetched, the thread branch kept); then the agent's `.git` made anew
 * unless it is at rest. `agentRepo: false` leaves the agent's `.git` out, for a workspace the agent
 * never sees (the kubernetes provider's runner-side copy: the agent's repository is in its pod).
 */
export async function prepareRepo(options: PrepareRepoOptions): Promise<PreparedRepo> {
  const { root, folder, repo, threadId, known, remote, take, owner, logger, agentRepo = true, seen, seed } = options;
  const { agentRepoAtRest } = options;

  const workTree = join(root, folder);
  const gitDir = gitDirOf(root, folder);
  const branch = threadBranch(threadId);
  const baseRef = `refs/heads/${repo.branch}`;
  const threadRef = `refs/heads/${branch}`;
  const { empty, revisions } = seen ?? (await remoteRevisions(root, remote, [baseRef, threadRef]));
  const start = revisions.get(threadRef) ?? null;

  if (known && existsSync(workTree) && existsSync(gitDir)) {
    // Later runs continue on the thread branch; the fetch only refreshes what the diff is taken against.
    const remoteBase = revisions.get(baseRef);
    const localBase = remoteBase
      ? await revision(root, { gitDir, workTree }, `refs/remotes/origin/${repo.branch}`)
      : null;
    const moved = remoteBase !== undefined && remoteBase !== localBase;
    let fetched = false;
    if (moved) {
      take.check();
      try {
        await git(
          root,
          ['fetch', '--quiet', '--no-tags', '--', remote.url, `+${baseRef}:refs/remotes/origin/${repo.branch}`],
          {
            repo: { gitDir, workTree },
            remote,
          },
        );
        fetched = true;
      } catch (err) {
        logger.warn({ err, repo: repo.full_name }, 'fetch failed; continuing with the clone as it is');
      }
    }
    if (owner !== null) {
      await secureGitDir(gitDir, owner);
      await ensureOwned(workTree, owner);
    }
    const atRest =
      !moved && agentRepoAtRest !== undefined && (await agentRepoFingerprint(workTree)) === agentRepoAtRest;
    if (agentRepo && !atRest)
      await makeAgentRepo({ gitDir, workTree }, { url: repo.clone_url, baseBranch: repo.branch, branch }, take, owner);
    return { state: known, start, fetched };
  }
  if (!empty && !revisions.has(baseRef))
    throw new SandboxError(`the branch ${repo.branch} does not exist in ${repo.full_name}`);

  // Made aside and moved in place, so a clone that dies halfway leaves nothing a later run would trust.
  let diverged = false;
  const suffix = randomBytes(4).toString('hex');
  const partial = { gitDir: `${gitDir}.partial-${suffix}`, workTree: join(root, `.${folder}.partial-${suffix}`) };
  try {
    take.check();
    await rm(workTree, { recursive: true, force: true });
    await rm(gitDir, { recursive: true, force: true });
    await git(root, ['init', '--quiet', '--bare', '--', partial.gitDir]);
    await mkdir(partial.workTree);
    const into = { repo: partial, remote };
    await git(root, ['config', 'core.bare', 'false'], into);
    await git(root, ['config', 'remote.origin.url', remote.url], into);
    if (!empty) {
      // Most of what the remote would send may be in the mirror already: taken from there first, the
      // fetch below then sends the rest.
      const seeded =
        seed !== undefined &&
        (await git(root, ['fetch', '--quiet', '--no-tags', '--', seed.url, `+${baseRef}:${SEED_REF}`], {
          repo: partial,
          remote: seed,
        }).then(
          () => true,
          (err: unknown) => (logger.debug({ err, repo: repo.full_name }, 'nothing taken from the mirror'), false),
        ));
      const refspecs = [`+${baseRef}:refs/remotes/origin/${repo.branch}`];
      if (start) refspecs.push(`+${threadRef}:refs/remotes/origin/${branch}`);
      await git(root, ['fetch', '--quiet', '--no-tags', '--', remote.url, ...refspecs], into);
      if (seeded) {
        // Only history the remote still has: a base rewritten since (a secret pushed, then removed)
        // leaves the mirror's old commits out of reach of the new base, and the clone is made again
        // without them.
        const kept = await git(
          root,
          ['merge-base', '--is-ancestor', SEED_REF, `refs/remotes/origin/${repo.branch}`],
          into,
        ).then(
          () => true,
          () => false,
        );
        if (!kept) throw new SeedDiverged();
        await git(root, ['update-ref', '-d', SEED_REF], into);
      }
      // A thread whose branch was pushed from a sandbox that is gone carries on from it.
      const from = start ? `refs/remotes/origin/${branch}` : `refs/remotes/origin/${repo.branch}`;
      await git(partial.workTree, ['checkout', '--quiet', '-B', branch, from, '--'], into);
    } else {
      // A repository with no commits yet (just created) has no branch to start from: the thread
      // branch starts from an empty tree, and its first commit is the repository's first.
      await git(root, ['symbolic-ref', 'HEAD', threadRef], into);
    }
    // The checkout is the sandbox's uid's before it is in place, and the runner's git directory its own.
    if (owner !== null) {
      await handOver([partial.workTree], owner);
      await secureGitDir(partial.gitDir, owner);
    }
    take.check();
    await rename(partial.gitDir, gitDir);
    take.check();
    await rename(partial.workTree, workTree);
  } catch (err) {
    if (!(err instanceof SeedDiverged)) throw err;
    logger.info({ repo: repo.full_name }, 'the mirror holds history the remote no longer has; cloning without it');
    diverged = true;
  } finally {
    await rm(partial.workTree, { recursive: true, force: true });
    await rm(partial.gitDir, { recursive: true, force: true });
  }
  if (diverged) {
    return prepareRepo({ ...options, seed: undefined, seen: { empty, revisions } });
  }
  const theirs = { gitDir, workTree };
  const base = empty
    ? EMPTY_TREE
    : (
        await git(root, ['rev-parse', '--verify', `refs/remotes/origin/${repo.branch}^{commit}`], { repo: theirs })
      ).trim();
  if (agentRepo) await makeAgentRepo(theirs, { url: repo.clone_url, baseBranch: repo.branch, branch }, take, owner);
  return { state: { dir: folder, base_branch: repo.branch, base_revision: base }, start, fetched: !empty };
}

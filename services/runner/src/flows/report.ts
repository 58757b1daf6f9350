import {
  domainEvents,
  type CandidateFailedEvent,
  type CandidateProducedEvent,
  type MessageCompletedEvent,
  type RunJob,
  type TerminalRunStatus,
} from '@threadwork/contracts';
import type { TurnOutcome } from '../harness/harness.js';
import { commitAndDiff, runnerRepo } from '../sandbox/candidate.js';
import { DomainPublishError } from '../clients/domain-events.js';
import { git, remoteRevisions } from '../sandbox/git.js';
import { SandboxTakenError, type SandboxRepo } from '../sandbox/provider.js';
import { refresh } from './claim.js';
import { errorMessage, type RunState } from './run-state.js';

// What a run leaves behind: its workspace committed, the thread branch pushed, the candidate of
// every repository and the agent's reply published as DOMAIN events.

/**
 * Commits the workspace and reports the candidate (every repository) and the agent's reply.
 * Throws DomainPublishError when one of them could not be published.
 */
export async function report(run: RunState, to: TerminalRunStatus, outcome: TurnOutcome): Promise<void> {
  const { deps, job, sandbox } = run;
  await run.sink.flush();
  if (sandbox) {
    for (const repo of sandbox.repos) {
      try {
        // A workspace kept elsewhere (a pod) comes into the runner's copy first; refused, nothing is committed.
        await sandbox.collect?.(repo);
        const candidate = await commitAndDiff(repo, sandbox.take, {
          message: commitMessage(job),
          maxDiffBytes: deps.config.DIFF_MAX_BYTES,
          owner: sandbox.owner,
        });
        // Not recorded, the next run makes the agent's repository anew itself: nothing is lost.
        await sandbox.agentRepoAtRest?.(repo).catch((err: unknown) => {
          if (err instanceof SandboxTakenError) throw err;
          run.log.warn({ err, repo: repo.full_name }, 'the agent’s repository could not be recorded as made');
        });
        if (sandbox.publish) {
          // The commit stands without it: the next run's prepare puts the branch in again.
          await sandbox.publish(repo).catch((err: unknown) => {
            if (err instanceof SandboxTakenError) throw err;
            run.log.warn({ err, repo: repo.full_name }, 'the agent’s repository could not be shown the commit');
          });
        }
        // A run that did not complete reports a candidate only if it changed something.
        if (to !== 'completed' && !candidate.committed) continue;
        if (candidate.committed) await pushBranch(run, repo);
        const event: CandidateProducedEvent = {
          thread_id: job.thread_id,
          run_id: job.run_id,
          owner_id: job.owner_id,
          project_repository_id: repo.project_repository_id,
          repository_id: repo.repository_id,
          branch: repo.branch,
          base_branch: repo.base_branch,
          base_revision: candidate.base_revision,
          candidate_revision: candidate.candidate_revision,
          diff: candidate.diff,
          truncated: candidate.truncated,
          files: candidate.files,
          stats: candidate.stats,
          at: new Date().toISOString(),
        };
        await run.publish(domainEvents.candidateProduced, event, `${job.run_id}:${repo.project_repository_id}`);
      } catch (err) {
        // Taken over since the last look: the workspace and what becomes of it are the newer attempt's.
        if (err instanceof SandboxTakenError) throw err;
        // Committed and pushed, but not announced: the run cannot say it completed (run.ts).
        if (err instanceof DomainPublishError) throw err;
        run.log.error({ err, repo: repo.full_name }, 'the workspace could not be committed');
        run.sink.push({ type: 'error', code: 'commit_failed', message: `${repo.full_name}: ${errorMessage(err)}` });
        // Review shows `diff.status: error` for this repository rather than an older candidate as if current.
        const failed: CandidateFailedEvent = {
          thread_id: job.thread_id,
          run_id: job.run_id,
          owner_id: job.owner_id,
          project_repository_id: repo.project_repository_id,
          repository_id: repo.repository_id,
          message: errorMessage(err).slice(0, 4096),
          at: new Date().toISOString(),
        };
        await run.publish(domainEvents.candidateFailed, failed, `${job.run_id}:${repo.project_repository_id}:failed`);
      }
    }
  }
  if (outcome.reply && outcome.reply.text.trim()) {
    const event: MessageCompletedEvent = {
      thread_id: job.thread_id,
      run_id: job.run_id,
      // One reply per run, whichever attempt got there.
      message_key: `${job.run_id}:reply`,
      text: outcome.reply.text,
      at: new Date().toISOString(),
    };
    await run.publish(domainEvents.messageCompleted, event, `${job.run_id}:reply`);
  }
}

/**
 * Publishes the thread branch to the repository it came from (its canonical URL, from the job;
 * never a remote the workspace names), where repohost opens or updates the pull request (a local
 * bare repository just gets the branch). The push leases on the revision the remote's branch had
 * when the run began: it replaces what this thread pushed before, never something pushed since —
 * e.g. by the attempt that took this run over. When the branch did move, a run that is still
 * this attempt's reads it again and pushes once more. A push that fails leaves the candidate in
 * the sandbox and says so in the run's events.
 */
async function pushBranch(run: RunState, repo: SandboxRepo): Promise<void> {
  const ref = `refs/heads/${repo.branch}`;
  try {
    const hold = { runId: run.job.run_id, claimId: run.claimId };
    const token = await run.deps.credentials(hold, repo.repository_id, repo.clone_url);
    const remote = { url: repo.clone_url, token };
    let lease = repo.start_revision ?? '';
    for (let tries = 0; ; tries++) {
      try {
        await git(
          repo.gitDir,
          ['push', '--quiet', `--force-with-lease=${ref}:${lease}`, '--', remote.url, `HEAD:${ref}`],
          {
            repo: runnerRepo(repo),
            remote,
          },
        );
        return;
      } catch (err) {
        if (tries > 0 || !/stale info|fetch first|rejected/.test(errorMessage(err))) throw err;
        await refresh(run);
        if (run.isFenced) throw new Error("this attempt was taken over; the branch is the new attempt's");
        lease = (await remoteRevisions(repo.gitDir, remote, [ref])).revisions.get(ref) ?? '';
        run.log.warn(
          { repo: repo.full_name },
          'the thread branch moved on the remote since the run began; pushing over it',
        );
      }
    }
  } catch (err) {
    run.log.warn({ err, repo: repo.full_name }, 'the thread branch could not be pushed');
    run.sink.push({ type: 'error', code: 'push_failed', message: `${repo.full_name}: ${errorMessage(err)}` });
  }
}

function commitMessage(job: RunJob): string {
  const firstLine = job.prompt.split('\n')[0]?.slice(0, 72) ?? '';
  return `${firstLine || 'Threadwork run'}\n\nThreadwork run ${job.run_id} on thread ${job.thread_id}.`;
}

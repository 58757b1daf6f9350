import type {
  ChecksAggregate,
  PublicationCheck,
  PublicationCommitStatus,
  PublicationState,
} from '@threadwork/contracts';

// Pull-request facts as review shows them, from GitHub's values.

const PENDING_CHECK = new Set(['queued', 'in_progress', 'requested', 'waiting', 'pending']);
const FAILED_CONCLUSION = new Set(['failure', 'cancelled', 'timed_out', 'action_required', 'startup_failure', 'stale']);
const FAILED_STATUS = new Set(['failure', 'error']);

/**
 * `none` without checks or statuses; `failure` when any check concluded badly or any status is
 * failure/error; else `pending` while any is still queued, running or pending; else `success`.
 * A failure wins over pending: one red check already decides the pull request is not green.
 */
export function checksAggregate(
  checks: readonly Pick<PublicationCheck, 'status' | 'conclusion'>[],
  statuses: readonly Pick<PublicationCommitStatus, 'state'>[],
): ChecksAggregate {
  if (checks.length === 0 && statuses.length === 0) return 'none';
  const failed =
    checks.some((c) => c.conclusion !== null && FAILED_CONCLUSION.has(c.conclusion)) ||
    statuses.some((s) => FAILED_STATUS.has(s.state));
  if (failed) return 'failure';
  const pending =
    checks.some((c) => PENDING_CHECK.has(c.status) || (c.status === 'completed' && c.conclusion === null)) ||
    statuses.some((s) => s.state === 'pending');
  return pending ? 'pending' : 'success';
}

/** GitHub says `open`/`closed` with separate `draft` and `merged` flags; we say one of four. */
export function publicationState(pull: {
  state: string;
  draft?: boolean;
  merged?: boolean;
  merged_at?: string | null;
}): PublicationState {
  if (pull.merged === true || (pull.merged_at !== undefined && pull.merged_at !== null)) return 'merged';
  if (pull.state === 'closed') return 'closed';
  return pull.draft === true ? 'draft' : 'open';
}

export function pullRequestTitle(threadName: string | null, threadId: string): string {
  const name = threadName?.trim();
  return name ? name.slice(0, 240) : `Threadwork: ${threadId}`;
}

export function pullRequestBody(input: {
  threadId: string;
  runId: string;
  candidateRevision: string;
  files: number;
  additions: number;
  deletions: number;
}): string {
  return [
    `Opened by Threadwork for thread \`${input.threadId}\`.`,
    '',
    `Latest run: \`${input.runId}\` at \`${input.candidateRevision}\``,
    `${input.files} file(s) changed, +${input.additions} −${input.deletions}.`,
  ].join('\n');
}

/** Is the 422 of a pull request creation GitHub saying one is already open for this head? */
export function isAlreadyExists(errors: unknown): boolean {
  if (!Array.isArray(errors)) return false;
  return errors.some(
    (e) =>
      typeof e === 'object' &&
      e !== null &&
      'message' in e &&
      typeof e.message === 'string' &&
      e.message.startsWith('A pull request already exists'),
  );
}

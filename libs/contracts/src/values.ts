import { z } from 'zod';

// Closed value sets of DESIGN.md section 4. The contract shows only example values; these are the
// complete sets we produce, so response schemas use them and clients can switch exhaustively.

/** `active` while a run is queued, starting, running, waiting for input or cancelling. */
export const ThreadStatus = z.enum(['active', 'idle']);
export type ThreadStatus = z.infer<typeof ThreadStatus>;
export const THREAD_STATUSES = ThreadStatus.options;

/** The task vocabulary folds run and interaction state into the task's own status. */
export const TaskStatus = z.enum(['setup', 'running', 'waiting', 'ready', 'failed', 'cancelled']);
export type TaskStatus = z.infer<typeof TaskStatus>;
export const TASK_STATUSES = TaskStatus.options;

/** `stopped`: reclaimed after idling and rebuilt on the next run. Null before the first run is picked up. */
export const SandboxStatus = z.enum(['initializing', 'ready', 'stopped', 'failed']);
export type SandboxStatus = z.infer<typeof SandboxStatus>;
export const SANDBOX_STATUSES = SandboxStatus.options;

export const RunStatus = z.enum([
  'queued',
  'starting',
  'running',
  'waiting_for_input',
  'cancelling',
  'completed',
  'failed',
  'cancelled',
]);
export type RunStatus = z.infer<typeof RunStatus>;
export const RUN_STATUSES = RunStatus.options;

export const TERMINAL_RUN_STATUSES = ['completed', 'failed', 'cancelled'] as const satisfies readonly RunStatus[];
export type TerminalRunStatus = (typeof TERMINAL_RUN_STATUSES)[number];

const terminalRunStatuses: ReadonlySet<RunStatus> = new Set(TERMINAL_RUN_STATUSES);

/** A terminal run never changes again; anything else still holds the thread's one live-run slot. */
export function isTerminalRunStatus(status: RunStatus): status is TerminalRunStatus {
  return terminalRunStatuses.has(status);
}

export const ControlKind = z.enum(['queue', 'steer']);
export type ControlKind = z.infer<typeof ControlKind>;
export const CONTROL_KINDS = ControlKind.options;

export const ControlStatus = z.enum(['pending', 'applied']);
export type ControlStatus = z.infer<typeof ControlStatus>;
export const CONTROL_STATUSES = ControlStatus.options;

export const InteractionKind = z.enum(['question', 'plan_approval']);
export type InteractionKind = z.infer<typeof InteractionKind>;
export const INTERACTION_KINDS = InteractionKind.options;

export const InteractionStatus = z.enum(['pending', 'answered', 'cancelled']);
export type InteractionStatus = z.infer<typeof InteractionStatus>;
export const INTERACTION_STATUSES = InteractionStatus.options;

/** `system` when the run was cancelled under a pending interaction; null fields mean "not cancelled". */
export const CancelledBy = z.enum(['user', 'system']);
export type CancelledBy = z.infer<typeof CancelledBy>;
export const CANCELLED_BY_VALUES = CancelledBy.options;

export const InteractionAction = z.enum(['answer', 'cancel']);
export type InteractionAction = z.infer<typeof InteractionAction>;
export const INTERACTION_ACTIONS = InteractionAction.options;

export const MessageRole = z.enum(['user', 'assistant']);
export type MessageRole = z.infer<typeof MessageRole>;
export const MESSAGE_ROLES = MessageRole.options;

/** `pending`: a run is still working on the candidate tree. */
export const DiffStatus = z.enum(['ready', 'pending', 'no_sandbox', 'error']);
export type DiffStatus = z.infer<typeof DiffStatus>;
export const DIFF_STATUSES = DiffStatus.options;

export const PublicationState = z.enum(['open', 'draft', 'closed', 'merged']);
export type PublicationState = z.infer<typeof PublicationState>;
export const PUBLICATION_STATES = PublicationState.options;

export const ChecksAggregate = z.enum(['none', 'pending', 'success', 'failure']);
export type ChecksAggregate = z.infer<typeof ChecksAggregate>;
export const CHECKS_AGGREGATES = ChecksAggregate.options;

/** `not_connected`: no installation linked yet; `not_configured`: no GitHub App configured at all. */
export const ConnectionStatus = z.enum(['ready', 'not_connected', 'not_configured', 'error']);
export type ConnectionStatus = z.infer<typeof ConnectionStatus>;
export const CONNECTION_STATUSES = ConnectionStatus.options;

export const CollaborationMode = z.enum(['default', 'plan']);
export type CollaborationMode = z.infer<typeof CollaborationMode>;
export const COLLABORATION_MODES = CollaborationMode.options;

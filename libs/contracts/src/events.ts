import { z } from 'zod';
import { Id } from './common.js';
import { RunError, RunUsage } from './api/runs.js';
import { ControlKind, InteractionKind, InteractionStatus, RunStatus } from './values.js';

// The harness-neutral `chunk` of a run event (DESIGN.md section 6). Objects are loose so a reader
// built against this version keeps working when a newer runner adds fields. Anything
// harness-specific travels only inside `raw`.

export const RUN_EVENT_CHUNK_TYPES = [
  'run.status',
  'sandbox.ready',
  'message.delta',
  'message.completed',
  'reasoning.delta',
  'command.started',
  'command.output',
  'command.completed',
  'file.changed',
  'plan.updated',
  'interaction.requested',
  'interaction.settled',
  'control.applied',
  'usage',
  'network.refused',
  'error',
] as const;

export const RunEventChunkType = z.enum(RUN_EVENT_CHUNK_TYPES);
export type RunEventChunkType = z.infer<typeof RunEventChunkType>;

const raw = z.unknown().optional();

/** Emitted on every transition of the run state machine. */
export const RunStatusChunk = z.looseObject({
  type: z.literal('run.status'),
  status: RunStatus,
  previous: RunStatus.optional(),
  error: RunError.optional(),
  raw,
});
export type RunStatusChunk = z.infer<typeof RunStatusChunk>;

/**
 * The sandbox is ready for the attempt's turn: the first event the runner writes in each attempt.
 * `layers` names what contains the agent, outermost first (e.g. `bubblewrap-jail`,
 * `codex-workspace-write`; `none-runner-user` when nothing does); `egress` is where it may connect.
 */
export const SandboxReadyChunk = z.looseObject({
  type: z.literal('sandbox.ready'),
  sandbox_id: Id,
  layers: z.array(z.string()),
  egress: z.enum(['none', 'allowlist', 'open']),
  raw,
});
export type SandboxReadyChunk = z.infer<typeof SandboxReadyChunk>;

/** `item_id` groups the deltas of one assistant message so clients can assemble it. */
export const MessageDeltaChunk = z.looseObject({
  type: z.literal('message.delta'),
  item_id: Id,
  delta: z.string(),
  raw,
});
export type MessageDeltaChunk = z.infer<typeof MessageDeltaChunk>;

/** The full text, so a client that joined mid-message need not replay the deltas. */
export const MessageCompletedChunk = z.looseObject({
  type: z.literal('message.completed'),
  item_id: Id,
  text: z.string(),
  raw,
});
export type MessageCompletedChunk = z.infer<typeof MessageCompletedChunk>;

export const ReasoningDeltaChunk = z.looseObject({
  type: z.literal('reasoning.delta'),
  item_id: Id,
  delta: z.string(),
  raw,
});
export type ReasoningDeltaChunk = z.infer<typeof ReasoningDeltaChunk>;

export const CommandStartedChunk = z.looseObject({
  type: z.literal('command.started'),
  item_id: Id,
  command: z.string(),
  raw,
});
export type CommandStartedChunk = z.infer<typeof CommandStartedChunk>;

/**
 * A piece of a command's output; a command's pieces in order are its output. `replace: true` says
 * this piece starts the output over (the harness streamed only part of it and the whole follows):
 * drop what was read of the command before it. `truncated: true` marks the note of the output cap.
 */
export const CommandOutputChunk = z.looseObject({
  type: z.literal('command.output'),
  item_id: Id,
  delta: z.string(),
  replace: z.boolean().optional(),
  truncated: z.boolean().optional(),
  raw,
});
export type CommandOutputChunk = z.infer<typeof CommandOutputChunk>;

/** `exit_code` is null when the command was killed or the harness does not report one. */
export const CommandCompletedChunk = z.looseObject({
  type: z.literal('command.completed'),
  item_id: Id,
  exit_code: z.int().nullable(),
  duration_ms: z.number().nonnegative().optional(),
  raw,
});
export type CommandCompletedChunk = z.infer<typeof CommandCompletedChunk>;

/** Named after git's statuses, the vocabulary the review diff uses for the same files. */
export const FileChangeKind = z.enum(['added', 'modified', 'deleted', 'renamed']);
export type FileChangeKind = z.infer<typeof FileChangeKind>;
export const FILE_CHANGE_KINDS = FileChangeKind.options;

/** `item_id` is optional: some changes are only seen by scanning the workspace after a turn. */
export const FileChangedChunk = z.looseObject({
  type: z.literal('file.changed'),
  item_id: Id.optional(),
  path: z.string().min(1),
  kind: FileChangeKind,
  raw,
});
export type FileChangedChunk = z.infer<typeof FileChangedChunk>;

export const PlanStepStatus = z.enum(['pending', 'in_progress', 'completed']);
export type PlanStepStatus = z.infer<typeof PlanStepStatus>;

export const PlanStep = z.looseObject({
  step: z.string(),
  status: PlanStepStatus,
});
export type PlanStep = z.infer<typeof PlanStep>;

/** Carries the whole plan each time, so the latest chunk alone is enough to render it. */
export const PlanUpdatedChunk = z.looseObject({
  type: z.literal('plan.updated'),
  plan: z.array(PlanStep),
  explanation: z.string().nullable().optional(),
  raw,
});
export type PlanUpdatedChunk = z.infer<typeof PlanUpdatedChunk>;

/** Only a pointer: the questions are read from the interaction, where they are owned and redacted. */
export const InteractionRequestedChunk = z.looseObject({
  type: z.literal('interaction.requested'),
  interaction_id: Id,
  kind: InteractionKind,
  raw,
});
export type InteractionRequestedChunk = z.infer<typeof InteractionRequestedChunk>;

/** Never carries the answers, since the log is readable by anyone who can read the run. */
export const InteractionSettledChunk = z.looseObject({
  type: z.literal('interaction.settled'),
  interaction_id: Id,
  status: InteractionStatus,
  raw,
});
export type InteractionSettledChunk = z.infer<typeof InteractionSettledChunk>;

export const ControlAppliedChunk = z.looseObject({
  type: z.literal('control.applied'),
  control_id: Id,
  kind: ControlKind,
  raw,
});
export type ControlAppliedChunk = z.infer<typeof ControlAppliedChunk>;

/** Cumulative for the run so far, like the run's `usage`, so the latest chunk supersedes earlier ones. */
export const UsageChunk = z.looseObject({
  type: z.literal('usage'),
  ...RunUsage.shape,
  raw,
});
export type UsageChunk = z.infer<typeof UsageChunk>;

/**
 * The sandbox refused a connection the agent tried to make (SANDBOX_EGRESS): to which host and
 * port, and why. Connections that bypass the proxy find no network and are not seen. `code` is
 * `egress_denied` (absent on events logged before it was added).
 */
export const NetworkRefusedChunk = z.looseObject({
  type: z.literal('network.refused'),
  code: z.literal('egress_denied').optional(),
  host: z.string(),
  port: z.int().min(0).max(65535),
  reason: z.string(),
  raw,
});
export type NetworkRefusedChunk = z.infer<typeof NetworkRefusedChunk>;

/** A failure reported inside the run; the run's own outcome arrives separately as `run.status`. */
export const ErrorChunk = z.looseObject({
  type: z.literal('error'),
  ...RunError.shape,
  raw,
});
export type ErrorChunk = z.infer<typeof ErrorChunk>;

export const RunEventChunk = z.discriminatedUnion('type', [
  RunStatusChunk,
  SandboxReadyChunk,
  MessageDeltaChunk,
  MessageCompletedChunk,
  ReasoningDeltaChunk,
  CommandStartedChunk,
  CommandOutputChunk,
  CommandCompletedChunk,
  FileChangedChunk,
  PlanUpdatedChunk,
  InteractionRequestedChunk,
  InteractionSettledChunk,
  ControlAppliedChunk,
  UsageChunk,
  NetworkRefusedChunk,
  ErrorChunk,
]);
export type RunEventChunk = z.infer<typeof RunEventChunk>;

// Fails to compile when the list and the union drift apart in either direction.
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const chunkTypesMatchUnion: Same<RunEventChunk['type'], RunEventChunkType> = true;
void chunkTypesMatchUnion;

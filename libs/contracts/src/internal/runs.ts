import { z } from 'zod';
import { AnswerRequest, Interaction, Question } from '../api/interactions.js';
import { Run, RunError, RunUsage } from '../api/runs.js';
import { BranchName, Id, JsonValue, Prompt } from '../common.js';
import { CollaborationMode, InteractionKind, InteractionStatus, RunStatus } from '../values.js';

// Messages between services: request/reply endpoints (gateway → services, service → service,
// runner → runs; `endpoints.ts`), the job on RUN_JOBS, signals to live runs and DOMAIN events
// (`domain-events.ts`). Every request that acts for a user carries `owner_id`; a resource of
// another owner is `not_found`, never forbidden. This file: what the runs service is asked, and
// what it hands a runner.

const OwnerId = Id;

// ---------------------------------------------------------------------------------------------
// Repositories a run works on

/** One repository of a thread's project, as the runner needs it to prepare the sandbox. */
export const RunRepository = z.object({
  /** The project_repository_id review takes. */
  project_repository_id: Id,
  repository_id: z.int().positive(),
  full_name: z.string().min(1),
  /** Base branch the thread branch starts from. */
  branch: BranchName,
  /** Where to clone from (repohost hands out credentials separately, never in here). */
  clone_url: z.string().min(1),
});
export type RunRepository = z.infer<typeof RunRepository>;

// ---------------------------------------------------------------------------------------------
// RUN_JOBS: one message per admitted run, on `run.jobs.<harness>`, Nats-Msg-Id = run id.

/**
 * What RUN_JOBS holds of a run: its ids, nothing of the job. A pull delivers it to an inbox of the
 * `runner` identity, which every holder of the runners' key may read; the job itself (prompt,
 * owner, repositories) comes only in the sealed reply to the claim.
 */
export const RunTicket = z.object({ run_id: Id, thread_id: Id });
export type RunTicket = z.infer<typeof RunTicket>;

/** The work of a run, as the runner that claims it receives it (runs.claim, sealed). */
export const RunJob = z.object({
  run_id: Id,
  thread_id: Id,
  project_id: Id,
  owner_id: OwnerId,
  message_id: Id,
  prompt: Prompt,
  harness: Id,
  model: Id,
  reasoning_effort: Id,
  collaboration_mode: CollaborationMode,
  repositories: z.array(RunRepository).min(1),
});
export type RunJob = z.infer<typeof RunJob>;

// ---------------------------------------------------------------------------------------------
// runs

export const AdmitRequest = z.object({
  owner_id: OwnerId,
  thread_id: Id,
  project_id: Id,
  message_id: Id,
  /**
   * Idempotency of admission: admitting twice with the same key returns the first run. Callers
   * use the id of the message (send/create) or of the queue control that asks for the run.
   */
  admission_key: Id,
  /** Pre-chosen run id, so a retried create returns the same ids. */
  run_id: Id.optional(),
  prompt: Prompt,
  harness: Id.optional(),
  model: Id.optional(),
  reasoning_effort: Id.optional(),
  collaboration_mode: CollaborationMode.optional(),
  repositories: z.array(RunRepository).min(1),
});
export type AdmitRequest = z.infer<typeof AdmitRequest>;
export const AdmitResponse = z.object({ run: Run, created: z.boolean() });

export const RunGetRequest = z.object({ owner_id: OwnerId, run_id: Id });
export const RunGetManyRequest = z.object({ owner_id: OwnerId, run_ids: z.array(Id).max(1000) });
/**
 * What lists need of each run: its id and status. Kept this lean on purpose: a whole run carries
 * an error of unbounded length, so a thousand of them could pass NATS' max_payload (1 MiB by
 * default); a thousand of these stay under 300 KB.
 */
export const RunState = z.object({ id: Id, status: RunStatus });
export type RunState = z.infer<typeof RunState>;
export const RunStateList = z.object({ runs: z.array(RunState) });
/** How many of the owner's runs are live (queued … cancelling), counted up to `at_most`. */
export const LiveCountRequest = z.object({ owner_id: OwnerId, at_most: z.int().min(1).max(1000) });
export const LiveCountResponse = z.object({ live: z.int().min(0) });
/** The live run of a thread (queued … cancelling), if any. */
export const LiveRunRequest = z.object({ owner_id: OwnerId, thread_id: Id });
export const LiveRunResponse = z.object({ run: Run.nullable() });
export const CancelRequest = z.object({ owner_id: OwnerId, run_id: Id });
/** `requested` is false when the run was already terminal (the API answers 200 instead of 202). */
export const CancelResponse = z.object({ run: Run, requested: z.boolean() });

export const EventsPageRequest = z.object({
  owner_id: OwnerId,
  run_id: Id,
  from: z.int().min(1),
  limit: z.int().min(1).max(1000),
});

/**
 * A runner's secret for one claim of a job, chosen at random by the runner: the same on every retry
 * of the claim (a retry whose first try was applied, its answer lost, gets the attempt it already
 * claimed instead of claiming the next one and fencing itself out), and afterwards the runner's
 * proof that it holds the run — for an installation token for the run's repositories and for the
 * answers to the run's questions. The runs service keeps only its hash.
 */
export const ClaimId = z.string().regex(/^[A-Za-z0-9_-]{24,128}$/, 'must be 24 to 128 URL-safe characters');
/**
 * The runner claims the next attempt of a run it took from RUN_JOBS; a lost race is
 * `already_settled`, whose `details.terminal` says whether the run is over (then its job is done
 * with) or held by another claim (then the job is that claim's).
 */
export const ClaimRequest = z.object({ run_id: Id, runner_id: Id, claim_id: ClaimId });
/** Whether `claim_id` holds the run now; what the holder may be given access to. */
export const HolderRequest = z.object({ run_id: Id, claim_id: ClaimId });
export const HolderResponse = z.object({
  owner_id: OwnerId,
  repository_ids: z.array(z.int().positive()),
});
export type HolderResponse = z.infer<typeof HolderResponse>;
/**
 * The runner's read of a run it claimed, instead of a read for an owner: where the run stands now
 * (a newer attempt may have taken it over, a cancel or the end come), for the claim that made
 * `attempt` and no one else, and nothing of the owner's data. Any other claim is `not_found`.
 */
export const AttemptStateRequest = z.object({ run_id: Id, attempt: z.int().min(0), claim_id: ClaimId });
/**
 * The holder of a run hands it back (it stops working it, e.g. on SIGTERM, and naks its job): its
 * lease ends now, so the job's next runner claims the run at once rather than once the lease ran
 * out. Only the claim that made the current attempt may; `released` false: the run had ended.
 */
export const ReleaseRequest = AttemptStateRequest;
export const ReleaseResponse = z.object({ released: z.boolean() });
export const AttemptState = z.object({
  status: RunStatus,
  /** The run's current attempt: another than the one asked about means that claim was fenced out. */
  attempt: z.int().min(0),
  terminal: z.boolean(),
});
/** A runner's DOMAIN subject, `evt.runner.<entity>.<verb>`. */
const RunnerEventSubject = z.string().regex(/^evt\.runner\.[a-z_]+\.[a-z_]+$/, 'must be a runner DOMAIN subject');
/** SHA-256 (hex) of a DOMAIN event's bytes as published (`domainEventDigest`). */
const EventDigest = z.string().regex(/^[0-9a-f]{64}$/, 'must be a SHA-256 in hex');
/**
 * The holder of a run says, under its claim (fenced as an append is), which DOMAIN event it is about
 * to publish about the run: its subject and the digest of its bytes. The runs service keeps it, so
 * a service acting on the event can tell it from one that a key alone could publish.
 */
export const AttestRequest = z.object({
  run_id: Id,
  attempt: z.int().min(0),
  claim_id: ClaimId,
  subject: RunnerEventSubject,
  digest: EventDigest,
});
export const AttestResponse = z.object({ attested: z.literal(true) });
/**
 * Whether a runner DOMAIN event is one the holder of run `run_id` published (its subject and
 * digest were attested), about that run as it is: of `thread_id`, and of `owner_id` and with that
 * project repository and repository when the event names them. Answers no user data: yes, or no
 * and why (for the asker's log).
 */
export const AttestationRequest = z.object({
  run_id: Id,
  subject: RunnerEventSubject,
  digest: EventDigest,
  thread_id: Id,
  owner_id: OwnerId.optional(),
  repository: z.object({ project_repository_id: Id, repository_id: z.int().positive() }).optional(),
});
export const AttestationResponse = z.object({ confirmed: z.boolean(), reason: z.string().nullable() });
/** The answers to a question of the run the caller holds. */
export const SettlementRequest = z.object({ run_id: Id, claim_id: ClaimId, interaction_id: Id });
export const ClaimResponse = z.object({ run: Run, attempt: z.int().min(0), job: RunJob });

/**
 * Moves a run; rejected unless `attempt` is the run's current attempt (a stale runner is fenced
 * out) and `claim_id` the claim that made it (a runner key that never claimed it cannot move it).
 */
export const TransitionRequest = z.object({
  run_id: Id,
  attempt: z.int().min(0),
  claim_id: ClaimId,
  to: RunStatus,
  error: RunError.optional(),
  usage: RunUsage.optional(),
  sandbox_id: Id.optional(),
});

/**
 * Appends events to a run's log, fenced as a move is (attempt and claim); `key`s make a retried
 * append store each chunk once.
 */
export const AppendRequest = z.object({
  run_id: Id,
  attempt: z.int().min(0),
  claim_id: ClaimId,
  events: z
    .array(z.object({ key: Id, chunk: z.record(z.string(), JsonValue) }))
    .min(1)
    .max(500),
});
export const AppendResponse = z.object({ sequences: z.array(z.int().min(1)) });

/** A question of the run's holder, fenced as a move is (attempt and claim). */
export const InteractionCreateRequest = z.object({
  run_id: Id,
  attempt: z.int().min(0),
  claim_id: ClaimId,
  /** Harness-side id, so a retried create returns the same interaction. */
  key: Id,
  kind: InteractionKind,
  questions: z.array(Question).min(1),
});
export const InteractionGetRequest = z.object({ owner_id: OwnerId, interaction_id: Id });
export const InteractionListRequest = z.object({
  owner_id: OwnerId,
  thread_id: Id,
  status: InteractionStatus.optional(),
});
export const InteractionAnswerRequest = z.object({ owner_id: OwnerId, interaction_id: Id, request: AnswerRequest });
/** What the runner reads back after an `interaction` signal: the answers in clear, secrets included. */
export const InteractionSettlement = z.object({
  interaction: Interaction,
  answers: z.record(Id, z.unknown()),
});

// ---------------------------------------------------------------------------------------------
// Signals to a live run, on core NATS `run.signal.<runId>`, sent after the durable state is
// written: a runner that missed one finds the same state in the runs service. A signal only says
// where to look: a steer names its control, whose text the runner reads from the threads service
// (`threads.steer.read`), so a forged or replayed signal puts no text of its own into a run.

export const RunSignal = z.discriminatedUnion('type', [
  z.object({ type: z.literal('cancel') }),
  z.object({ type: z.literal('steer'), control_id: Id }),
  z.object({ type: z.literal('interaction'), interaction_id: Id }),
]);
export type RunSignal = z.infer<typeof RunSignal>;

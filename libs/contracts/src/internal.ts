import { z } from 'zod';
import { BranchName, Cursor, Id, JsonValue, Prompt, Timestamp } from './common.js';
import { ControlList, ControlSubmission, TaskControlList } from './api/controls.js';
import { AnswerRequest, AnswerResult, Interaction, InteractionList, Question } from './api/interactions.js';
import { MessageAccepted, MessagePage, SendMessageBody } from './api/messages.js';
import { QueueBody, SteerBody } from './api/controls.js';
import {
  CodeChallenge,
  InstallSession,
  LinkedInstallation,
  LinkInstallationRequest,
  Repository,
  RepositoryList,
  ProviderConnection,
} from './api/repohost.js';
import { DiffFile, Publication, ReviewEvidence, ReviewStats } from './api/review.js';
import { Run, RunError, RunEventPage, RunUsage } from './api/runs.js';
import {
  CreateThreadBody,
  ResumableRun,
  Task,
  TaskList,
  TaskWithRun,
  THREAD_PAGE_LIMIT_DEFAULT,
  THREAD_PAGE_LIMIT_MAX,
  Thread,
  ThreadWithRun,
} from './api/threads.js';
import { ProjectRepository, WorkList } from './api/work.js';
import { defineEndpoint } from './rpc.js';
import { SERVICES } from './subjects.js';
import {
  CollaborationMode,
  ControlStatus,
  InteractionKind,
  InteractionStatus,
  RunStatus,
  SandboxStatus,
} from './values.js';

// Messages between services: request/reply endpoints (gateway → services, service → service,
// runner → runs), the job on RUN_JOBS, signals to live runs and DOMAIN events. Every request that
// acts for a user carries `owner_id`; a resource of another owner is `not_found`, never forbidden.

const OwnerId = Id;
/** Which vocabulary a response is shaped for: `/v1/threads…` or `/v1/tasks…`. */
export const View = z.enum(['thread', 'task']);
export type View = z.infer<typeof View>;

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
// threads

export const CreateRequest = z.object({ owner_id: OwnerId, view: View, body: CreateThreadBody });
export const ThreadGetRequest = z.object({ owner_id: OwnerId, thread_id: Id, view: View });
/** A page of the owner's threads, newest first (GET /v1/tasks and GET /v1/work). */
export const ThreadPageRequest = z.object({
  owner_id: OwnerId,
  cursor: Cursor.optional(),
  limit: z.int().min(1).max(THREAD_PAGE_LIMIT_MAX).default(THREAD_PAGE_LIMIT_DEFAULT),
});
export const OwnerRequest = z.object({ owner_id: OwnerId });
/** The project of one of the owner's threads, with its repositories (what review checks a request against). */
export const ThreadProjectRequest = z.object({ owner_id: OwnerId, thread_id: Id });
export const ThreadProject = z.object({ thread_id: Id, project_id: Id, repositories: z.array(ProjectRepository) });
export type ThreadProject = z.infer<typeof ThreadProject>;
export const ThreadMessageRequest = z.object({ owner_id: OwnerId, thread_id: Id, body: SendMessageBody });
export const ThreadQueueRequest = z.object({ owner_id: OwnerId, thread_id: Id, body: QueueBody });
export const ThreadSteerRequest = z.object({ owner_id: OwnerId, thread_id: Id, body: SteerBody });
export const ThreadMessagesRequest = z.object({
  owner_id: OwnerId,
  thread_id: Id,
  cursor: Cursor.optional(),
  limit: z.int().min(1).max(200),
});
export const ThreadControlsRequest = z.object({
  owner_id: OwnerId,
  thread_id: Id,
  view: View,
  status: ControlStatus.optional(),
});
export const ResumableResponse = z.object({ run: ResumableRun.nullable() });
/**
 * Internal only (the runner; never through the gateway): a steer the runner was signalled, read
 * back from the threads service before the harness gets it, by the holder of the run it targets
 * (its claim id, checked with the runs service). `not_found` for a control that is not a steer of
 * that run; `already_settled` for one no longer pending (applied, or queued after its run).
 */
export const SteerReadRequest = z.object({ run_id: Id, claim_id: ClaimId, control_id: Id });
export const SteerRead = z.object({ control_id: Id, prompt: Prompt });

// ---------------------------------------------------------------------------------------------
// repohost

export const RepositoriesRequest = z.object({ owner_id: OwnerId, q: z.string().max(256).optional() });
/** Resolves repositories the owner can see, in the order asked; any other is `not_found`. */
export const AccessRequest = z.object({
  owner_id: OwnerId,
  repository_ids: z.array(z.int().positive()).min(1).max(11),
});
/**
 * A repository as services see it: the public shape plus where the runner clones it from. The
 * clone URL may be a path on the server's disk (the `local` provider), so it never leaves the
 * deployment: clients see `url`, which names the repository without one.
 */
export const HostedRepository = Repository.extend({ clone_url: z.string().min(1) });
export type HostedRepository = z.infer<typeof HostedRepository>;
export const AccessResponse = z.object({ repositories: z.array(HostedRepository) });

/**
 * POST /v1/repohost/install-session: `return_to` is checked against the configured app scheme by
 * repohost; `code_challenge` binds the one-time code the setup callback mints to this caller's verifier.
 */
export const InstallSessionCreateRequest = z.object({
  owner_id: OwnerId,
  return_to: z.string().min(1).max(2048),
  code_challenge: CodeChallenge,
});
/**
 * GET /v1/repohost/setup, the provider's redirect after an installation (unauthenticated: `state`
 * is the proof). `code` is present when the app asks for user authorization during installation.
 */
export const SetupRequest = z.object({
  installation_id: z.int().positive().optional(),
  setup_action: z.string().max(256).optional(),
  state: Id,
  code: z.string().min(1).max(512).optional(),
});
/** Where the gateway redirects the browser (302): the session's `return_to` with the outcome. */
export const SetupResponse = z.object({ redirect_to: z.string().min(1) });
/**
 * POST /v1/repohost/installations: the caller redeems the setup callback's one-time code with the
 * verifier of the install session it created; only then is the installation linked to it.
 */
export const LinkRequest = LinkInstallationRequest.extend({ owner_id: OwnerId });
/**
 * POST /v1/repohost/webhooks, forwarded by the gateway untouched: the body travels base64-encoded
 * so the signature is checked over exactly the bytes the provider signed.
 */
export const WebhookRequest = z.object({
  event: z.string().min(1).max(256),
  delivery: Id,
  signature: z.string().max(512).optional(),
  content_type: z.string().max(256).optional(),
  body_base64: z.string(),
});
/** `duplicate`: this delivery id was received before and is not processed again. */
export const WebhookResponse = z.object({ status: z.enum(['accepted', 'duplicate']) });
/**
 * Internal only (never through the gateway): a short-lived credential for git over HTTPS to the
 * repositories asked for, all of one installation. Null for repositories that need none (local).
 * Only for the runner holding a live run (its claim id), and only for that run's repositories,
 * for the run's owner.
 */
export const TokenRequest = z.object({
  run_id: Id,
  claim_id: ClaimId,
  repository_ids: z.array(z.int().positive()).min(1).max(11),
});
export const TokenResponse = z.object({ token: z.string().min(1).nullable(), expires_at: Timestamp.nullable() });
/** The pull request of a thread's repository; null when none was opened (local repositories never get one). */
export const PublicationRequest = z.object({ owner_id: OwnerId, thread_id: Id, project_repository_id: Id });

// ---------------------------------------------------------------------------------------------
// review

export const ReviewGetRequest = z.object({ owner_id: OwnerId, thread_id: Id, project_repository_id: Id });

/**
 * Replies that reach a runner with a secret or a user's content in them (the job and its prompt,
 * a repository token, answers, steer text, the agent's own questions) are sealed: every runner
 * connects as the one `runner` identity, so any holder of its key may read its reply inboxes.
 */
const SEALED = { sealed: true } as const;

export const rpc = {
  runs: {
    admit: defineEndpoint(SERVICES.runs.subjects.admit, AdmitRequest, AdmitResponse),
    get: defineEndpoint(SERVICES.runs.subjects.get, RunGetRequest, Run),
    getMany: defineEndpoint(SERVICES.runs.subjects.getMany, RunGetManyRequest, RunStateList),
    live: defineEndpoint(SERVICES.runs.subjects.live, LiveRunRequest, LiveRunResponse),
    liveCount: defineEndpoint(SERVICES.runs.subjects.liveCount, LiveCountRequest, LiveCountResponse),
    cancel: defineEndpoint(SERVICES.runs.subjects.cancel, CancelRequest, CancelResponse),
    eventsPage: defineEndpoint(SERVICES.runs.subjects.eventsPage, EventsPageRequest, RunEventPage),
    claim: defineEndpoint(SERVICES.runs.subjects.claim, ClaimRequest, ClaimResponse, SEALED),
    transition: defineEndpoint(SERVICES.runs.subjects.transition, TransitionRequest, Run),
    append: defineEndpoint(SERVICES.runs.subjects.append, AppendRequest, AppendResponse),
    interactionCreate: defineEndpoint(
      SERVICES.runs.subjects.interactionCreate,
      InteractionCreateRequest,
      Interaction,
      SEALED,
    ),
    interactionGet: defineEndpoint(SERVICES.runs.subjects.interactionGet, InteractionGetRequest, Interaction),
    interactionList: defineEndpoint(SERVICES.runs.subjects.interactionList, InteractionListRequest, InteractionList),
    interactionAnswer: defineEndpoint(SERVICES.runs.subjects.interactionAnswer, InteractionAnswerRequest, AnswerResult),
    interactionSettlement: defineEndpoint(
      SERVICES.runs.subjects.interactionSettlement,
      SettlementRequest,
      InteractionSettlement,
      SEALED,
    ),
    holder: defineEndpoint(SERVICES.runs.subjects.holder, HolderRequest, HolderResponse),
    attemptState: defineEndpoint(SERVICES.runs.subjects.attemptState, AttemptStateRequest, AttemptState),
    release: defineEndpoint(SERVICES.runs.subjects.release, ReleaseRequest, ReleaseResponse),
    attest: defineEndpoint(SERVICES.runs.subjects.attest, AttestRequest, AttestResponse),
    attestation: defineEndpoint(SERVICES.runs.subjects.attestation, AttestationRequest, AttestationResponse),
  },
  threads: {
    create: defineEndpoint(SERVICES.threads.subjects.create, CreateRequest, z.union([ThreadWithRun, TaskWithRun])),
    get: defineEndpoint(SERVICES.threads.subjects.get, ThreadGetRequest, z.union([Thread, Task])),
    list: defineEndpoint(SERVICES.threads.subjects.list, ThreadPageRequest, TaskList),
    work: defineEndpoint(SERVICES.threads.subjects.work, ThreadPageRequest, WorkList),
    project: defineEndpoint(SERVICES.threads.subjects.project, ThreadProjectRequest, ThreadProject),
    resumable: defineEndpoint(
      SERVICES.threads.subjects.resumable,
      z.object({ owner_id: OwnerId, thread_id: Id }),
      ResumableResponse,
    ),
    message: defineEndpoint(SERVICES.threads.subjects.message, ThreadMessageRequest, MessageAccepted),
    queue: defineEndpoint(SERVICES.threads.subjects.queue, ThreadQueueRequest, ControlSubmission),
    steer: defineEndpoint(SERVICES.threads.subjects.steer, ThreadSteerRequest, ControlSubmission),
    messages: defineEndpoint(SERVICES.threads.subjects.messages, ThreadMessagesRequest, MessagePage),
    controls: defineEndpoint(
      SERVICES.threads.subjects.controls,
      ThreadControlsRequest,
      z.union([ControlList, TaskControlList]),
    ),
    steerRead: defineEndpoint(SERVICES.threads.subjects.steerRead, SteerReadRequest, SteerRead, SEALED),
  },
  repohost: {
    connection: defineEndpoint(SERVICES.repohost.subjects.connection, OwnerRequest, ProviderConnection),
    repositories: defineEndpoint(SERVICES.repohost.subjects.repositories, RepositoriesRequest, RepositoryList),
    access: defineEndpoint(SERVICES.repohost.subjects.access, AccessRequest, AccessResponse),
    installSession: defineEndpoint(
      SERVICES.repohost.subjects.installSession,
      InstallSessionCreateRequest,
      InstallSession,
    ),
    setup: defineEndpoint(SERVICES.repohost.subjects.setup, SetupRequest, SetupResponse),
    link: defineEndpoint(SERVICES.repohost.subjects.link, LinkRequest, LinkedInstallation),
    webhook: defineEndpoint(SERVICES.repohost.subjects.webhook, WebhookRequest, WebhookResponse),
    token: defineEndpoint(SERVICES.repohost.subjects.token, TokenRequest, TokenResponse, SEALED),
    publication: defineEndpoint(SERVICES.repohost.subjects.publication, PublicationRequest, Publication.nullable()),
  },
  review: {
    get: defineEndpoint(SERVICES.review.subjects.get, ReviewGetRequest, ReviewEvidence),
  },
} as const;

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

// ---------------------------------------------------------------------------------------------
// DOMAIN events (`evt.<service>.<entity>.<verb>`), Nats-Msg-Id given per event. A runner's event
// about a run counts only once the runs service confirms its holder published it
// (`runs.attest` before publishing, `runs.attestation` before acting on it): NATS lets any
// holder of the runner's key publish on `evt.runner.>`.

export const domainEvents = {
  /** Every run transition; `terminal` ones free the thread for its next run. */
  runStatus: { service: 'runs', entity: 'run', verb: 'status' },
  /** The runner's view of a thread's workspace. */
  sandboxStatus: { service: 'runner', entity: 'sandbox', verb: 'status' },
  /** A steer the harness accepted. */
  controlApplied: { service: 'runner', entity: 'control', verb: 'applied' },
  /** The agent's reply at the end of a turn, stored as an assistant message. */
  messageCompleted: { service: 'runner', entity: 'message', verb: 'completed' },
  /** A run's work committed on the thread branch: the candidate revision with its bounded diff. */
  candidateProduced: { service: 'runner', entity: 'candidate', verb: 'produced' },
  /** A run's candidate could not be committed or diffed; review shows `diff.status: error`. */
  candidateFailed: { service: 'runner', entity: 'candidate', verb: 'failed' },
  /** A provider webhook whose signature checked out, queued for repohost's own consumer. */
  webhookReceived: { service: 'repohost', entity: 'webhook', verb: 'received' },
} as const;

export const RunStatusEvent = z.object({
  run_id: Id,
  thread_id: Id,
  owner_id: OwnerId,
  status: RunStatus,
  previous: RunStatus.nullable(),
  terminal: z.boolean(),
  attempt: z.int().min(0),
  error: RunError.nullable(),
  at: Timestamp,
});
export type RunStatusEvent = z.infer<typeof RunStatusEvent>;

export const SandboxStatusEvent = z.object({
  thread_id: Id,
  /**
   * The run the sandbox was prepared for (its holder attested the event); null for a status of no
   * run: a sandbox stopped after idling.
   */
  run_id: Id.nullable().default(null),
  status: SandboxStatus,
  sandbox_id: Id.nullable(),
  reason: z.string().nullable(),
  at: Timestamp,
});
export type SandboxStatusEvent = z.infer<typeof SandboxStatusEvent>;

export const ControlAppliedEvent = z.object({ control_id: Id, run_id: Id, thread_id: Id, at: Timestamp });
export type ControlAppliedEvent = z.infer<typeof ControlAppliedEvent>;

export const MessageCompletedEvent = z.object({
  thread_id: Id,
  run_id: Id,
  /** Stable per reply, so a redelivered event stores one message. */
  message_key: Id,
  text: z.string(),
  at: Timestamp,
});
export type MessageCompletedEvent = z.infer<typeof MessageCompletedEvent>;

/** One event per project repository after each run (Nats-Msg-Id `${run_id}:${project_repository_id}`). */
export const CandidateProducedEvent = z.object({
  thread_id: Id,
  run_id: Id,
  owner_id: OwnerId,
  project_repository_id: Id,
  repository_id: z.int().positive(),
  /** The thread branch (`threadwork/<thread id>`) the revision is on. */
  branch: z.string().min(1),
  base_branch: z.string().min(1),
  base_revision: z.string().min(1),
  candidate_revision: z.string().min(1),
  /** Unified diff of base..candidate, cut at the runner's byte bound. */
  diff: z.string(),
  truncated: z.boolean(),
  files: z.array(DiffFile),
  stats: ReviewStats,
  at: Timestamp,
});
export type CandidateProducedEvent = z.infer<typeof CandidateProducedEvent>;

/** One event per project repository whose candidate failed (Nats-Msg-Id `${run_id}:${project_repository_id}:failed`). */
export const CandidateFailedEvent = z.object({
  thread_id: Id,
  run_id: Id,
  owner_id: OwnerId,
  project_repository_id: Id,
  repository_id: z.int().positive(),
  message: z.string().max(4096),
  at: Timestamp,
});
export type CandidateFailedEvent = z.infer<typeof CandidateFailedEvent>;

/** A verified provider webhook (Nats-Msg-Id = the delivery id), processed asynchronously by repohost. */
export const WebhookReceivedEvent = z.object({
  delivery: Id,
  event: z.string().min(1).max(256),
  payload: z.record(z.string(), JsonValue),
  received_at: Timestamp,
});
export type WebhookReceivedEvent = z.infer<typeof WebhookReceivedEvent>;

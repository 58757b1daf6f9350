import { z } from 'zod';
import { ControlList, ControlSubmission, TaskControlList } from '../api/controls.js';
import { HarnessList } from '../api/harnesses.js';
import { AnswerResult, Interaction, InteractionList } from '../api/interactions.js';
import { MessageAccepted, MessagePage } from '../api/messages.js';
import { InstallSession, LinkedInstallation, ProviderConnection, RepositoryList } from '../api/repohost.js';
import { Publication, ReviewEvidence } from '../api/review.js';
import { Run, RunEventPage } from '../api/runs.js';
import { Task, TaskList, TaskWithRun, Thread, ThreadWithRun } from '../api/threads.js';
import { WorkList } from '../api/work.js';
import { Id } from '../common.js';
import { defineEndpoint } from '../rpc.js';
import { SERVICES } from '../subjects.js';
import {
  AccessRequest,
  AccessResponse,
  InstallSessionCreateRequest,
  LinkRequest,
  OAuthClientRequest,
  OAuthClientResponse,
  OAuthUserRequest,
  OAuthUserResponse,
  PublicationRequest,
  RepositoriesRequest,
  SetupRequest,
  SetupResponse,
  TokenRequest,
  TokenResponse,
  WebhookRequest,
  WebhookResponse,
} from './repohost.js';
import {
  AdmitRequest,
  AdmitResponse,
  AppendRequest,
  AppendResponse,
  AttemptState,
  AttemptStateRequest,
  AttestRequest,
  AttestResponse,
  AttestationRequest,
  AttestationResponse,
  CancelRequest,
  CancelResponse,
  ClaimRequest,
  ClaimResponse,
  EventsPageRequest,
  HolderRequest,
  HolderResponse,
  InteractionAnswerRequest,
  InteractionCreateRequest,
  InteractionGetRequest,
  InteractionListRequest,
  InteractionSettlement,
  LiveCountRequest,
  LiveCountResponse,
  LiveRunRequest,
  LiveRunResponse,
  ReleaseRequest,
  ReleaseResponse,
  RunGetManyRequest,
  RunGetRequest,
  RunStateList,
  SettlementRequest,
  TransitionRequest,
} from './runs.js';
import {
  CreateRequest,
  OwnerRequest,
  ResumableResponse,
  SteerRead,
  SteerReadRequest,
  ThreadControlsRequest,
  ThreadGetRequest,
  ThreadMessageRequest,
  ThreadMessagesRequest,
  ThreadPageRequest,
  ThreadProject,
  ThreadProjectRequest,
  ThreadQueueRequest,
  ThreadSteerRequest,
} from './threads.js';

// Every request/reply endpoint between services, grouped by the service that serves it.

const OwnerId = Id;

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
    /** The harness catalog the runs service was configured with (GET /v1/harnesses). */
    harnesses: defineEndpoint(SERVICES.runs.subjects.harnesses, z.object({}), HarnessList),
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
    oauthClient: defineEndpoint(SERVICES.repohost.subjects.oauthClient, OAuthClientRequest, OAuthClientResponse),
    oauthUser: defineEndpoint(SERVICES.repohost.subjects.oauthUser, OAuthUserRequest, OAuthUserResponse),
  },
  review: {
    get: defineEndpoint(SERVICES.review.subjects.get, ReviewGetRequest, ReviewEvidence),
  },
} as const;

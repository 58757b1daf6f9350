import { z } from 'zod';
import { ErrorBody } from '../errors.js';
import { Harness, HarnessList } from './harnesses.js';
import {
  ControlList,
  ControlSubmission,
  QueueBody,
  RunControl,
  SteerBody,
  TaskControlList,
  TaskRunControl,
} from './controls.js';
import {
  AnswerRequest,
  AnswerResult,
  Interaction,
  InteractionList,
  PublicAnswerEntry,
  Question,
  QuestionOption,
} from './interactions.js';
import { Message, MessageAccepted, MessagePage, SendMessageBody } from './messages.js';
import {
  Installation,
  InstallSession,
  InstallSessionRequest,
  LinkedInstallation,
  LinkInstallationRequest,
  ProviderConnection,
  Repository,
  RepositoryList,
} from './repohost.js';
import { Publication, ReviewEvidence } from './review.js';
import { SessionInfo } from './session.js';
import { Run, RunError, RunEvent, RunEventPage, RunUsage } from './runs.js';
import {
  CreateTaskBody,
  CreateThreadBody,
  ResumableRun,
  Task,
  TaskList,
  TaskWithRun,
  Thread,
  ThreadWithRun,
} from './threads.js';
import { Project, WorkList } from './work.js';

/**
 * The public API's shared shapes, by the name they carry in the OpenAPI document: the gateway
 * writes each once under `components.schemas` and refers to it, so generated clients get one named
 * type per shape instead of an anonymous copy per operation. Names are part of the API: never
 * rename one.
 */
export const API_COMPONENTS: Record<string, z.ZodType> = {
  AnswerRequest,
  AnswerResult,
  ControlList,
  ControlSubmission,
  CreateTaskBody,
  CreateThreadBody,
  ErrorBody,
  Harness,
  HarnessList,
  Installation,
  InstallSession,
  InstallSessionRequest,
  Interaction,
  InteractionList,
  LinkedInstallation,
  LinkInstallationRequest,
  Message,
  MessageAccepted,
  MessagePage,
  Project,
  ProviderConnection,
  Publication,
  PublicAnswerEntry,
  Question,
  QuestionOption,
  QueueBody,
  Repository,
  RepositoryList,
  ResumableRun,
  ReviewEvidence,
  Run,
  RunControl,
  RunError,
  RunEvent,
  RunEventPage,
  RunUsage,
  SendMessageBody,
  SessionInfo,
  SteerBody,
  Task,
  TaskControlList,
  TaskList,
  TaskRunControl,
  TaskWithRun,
  Thread,
  ThreadWithRun,
  WorkList,
};

/** Names the shapes in zod's global registry, where OpenAPI generation looks for ids. Idempotent. */
export function registerApiComponents(registry = z.globalRegistry): void {
  for (const [id, schema] of Object.entries(API_COMPONENTS)) {
    registry.add(schema, { ...registry.get(schema), id });
  }
}

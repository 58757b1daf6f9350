import { SubjectTokenError } from '@threadwork/contracts';
import {
  AppError,
  invalidRequest,
  notFound,
  type JetStreamClient,
  type Logger,
  type NatsConnection,
} from '@threadwork/platform';
import type { RunsConfig } from '../config.js';
import type { EventArchive } from '../store/event-archive.js';
import type { EventLog } from '../store/event-log.js';
import type { InteractionStore } from '../store/interactions.js';
import type { RunDoc, RunStore } from '../store/runs.js';

/** What the flows of the runs service work with; built once at start-up. */
export interface RunsContext {
  store: RunStore;
  interactions: InteractionStore;
  log: EventLog;
  /** Run event logs moved out of their streams once the run ended long enough ago (flows/archive.ts). */
  archive: EventArchive;
  nc: NatsConnection;
  js: JetStreamClient;
  config: RunsConfig;
  logger: Logger;
}

export async function loadRun(ctx: RunsContext, runId: string): Promise<RunDoc> {
  const run = await ctx.store.run(runId);
  if (!run) throw notFound('run');
  return run;
}

/** A run of another owner is reported as nonexistent, never as forbidden. */
export async function loadOwnedRun(ctx: RunsContext, runId: string, ownerId: string): Promise<RunDoc> {
  const run = await loadRun(ctx, runId);
  if (run.owner_id !== ownerId) throw notFound('run');
  return run;
}

/**
 * A runner holding an older attempt was fenced out by a redelivered job: whatever it reports is
 * refused, and `already_settled` tells it the run's fate is no longer its to decide.
 */
export function staleAttempt(run: RunDoc, attempt: number): AppError {
  return new AppError('already_settled', `stale attempt ${attempt}: run ${run._id} is at attempt ${run.attempt}`, {
    details: { attempt: run.attempt },
  });
}

/** Ids end up in subjects; one that cannot be a subject token is a bad request, not a crash. */
export function subjectOrInvalid(build: () => string): string {
  try {
    return build();
  } catch (err) {
    if (err instanceof SubjectTokenError) throw invalidRequest(err.message);
    throw err;
  }
}

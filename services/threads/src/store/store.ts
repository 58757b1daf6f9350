import type { Db } from '@threadwork/platform';
import { createControlStore } from './controls.js';
import { createMessageStore } from './messages.js';
import { createProjectStore } from './projects.js';
import { createRequestStore } from './requests.js';
import { createThreadStore } from './threads.js';
import { createWaitStore } from './waits.js';

export type ThreadsStore = ReturnType<typeof createThreadsStore>;

/**
 * The collections threads owns (DESIGN.md section 1). Every "exactly one wins" decision here is an
 * insert against a unique index, never a conditional update: FerretDB does not make those atomic.
 */
export interface ThreadsStoreOptions {
  /** How long an idempotency record binds its `client_request_id`. */
  idempotencyTtlMs: number;
}

export function createThreadsStore(db: Db, { idempotencyTtlMs }: ThreadsStoreOptions) {
  const projects = createProjectStore(db);
  const threads = createThreadStore(db);
  const messages = createMessageStore(db);
  const controls = createControlStore(db);
  const waits = createWaitStore(db);
  const requests = createRequestStore(db, idempotencyTtlMs);

  return {
    ...projects,
    ...threads,
    ...messages,
    ...controls,
    ...waits,
    ...requests,
    async ensureIndexes(): Promise<void> {
      for (const collection of [projects, threads, messages, controls, waits, requests]) {
        await collection.ensureIndexes();
      }
    },
  };
}

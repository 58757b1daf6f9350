import { rpc, type ThreadProject } from '@threadwork/contracts';
import { request, type NatsConnection } from '@threadwork/platform';
import type { z } from 'zod';

/** What review asks the threads service. */
export interface ThreadsClient {
  /** The project of the owner's thread; `not_found` for a thread that is not theirs. */
  project(ownerId: string, threadId: string): Promise<z.output<typeof ThreadProject>>;
}

export function createThreadsClient(nc: NatsConnection, timeoutMs: number): ThreadsClient {
  return {
    project: (ownerId, threadId) =>
      request(nc, rpc.threads.project, { owner_id: ownerId, thread_id: threadId }, { timeoutMs }),
  };
}

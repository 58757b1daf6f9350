import { rpc, type Publication, type PublicationRequest } from '@threadwork/contracts';
import { request, type NatsConnection } from '@threadwork/platform';
import type { z } from 'zod';

/** What review asks repohost. */
export interface RepohostClient {
  /** The thread's pull request for one project repository, synced when stale; null when none. */
  publication(req: z.input<typeof PublicationRequest>): Promise<z.output<typeof Publication> | null>;
}

export function createRepohostClient(nc: NatsConnection, timeoutMs: number): RepohostClient {
  return {
    publication: (req) => request(nc, rpc.repohost.publication, req, { timeoutMs }),
  };
}

import { rpc, type AttestationRequest, type AttestationResponse } from '@threadwork/contracts';
import { request, type NatsConnection } from '@threadwork/platform';
import type { z } from 'zod';

/** What review asks the runs service. */
export interface RunsClient {
  /** Did the holder of the event's run publish it, about that run as it is? */
  attestation(req: z.input<typeof AttestationRequest>): Promise<z.output<typeof AttestationResponse>>;
  /** Whether the thread has a live run now. */
  hasLiveRun(ownerId: string, threadId: string): Promise<boolean>;
}

export function createRunsClient(nc: NatsConnection, timeoutMs: number): RunsClient {
  return {
    attestation: (req) => request(nc, rpc.runs.attestation, req, { timeoutMs }),
    async hasLiveRun(ownerId, threadId) {
      const live = await request(nc, rpc.runs.live, { owner_id: ownerId, thread_id: threadId }, { timeoutMs });
      return live.run !== null;
    },
  };
}

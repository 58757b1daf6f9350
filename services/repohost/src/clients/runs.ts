import { rpc, type AttestationRequest, type AttestationResponse, type HolderResponse } from '@threadwork/contracts';
import { request, type NatsConnection } from '@threadwork/platform';
import type { z } from 'zod';

/** What repohost asks the runs service. */
export interface RunsClient {
  /** Does this claim hold this live run, and what may it reach? */
  holder(runId: string, claimId: string): Promise<z.output<typeof HolderResponse>>;
  /** Is this runner event one its run's holder published, about that run as it is? */
  attestation(req: z.input<typeof AttestationRequest>): Promise<z.output<typeof AttestationResponse>>;
}

export function createRunsClient(nc: NatsConnection): RunsClient {
  return {
    holder: (runId, claimId) =>
      request(nc, rpc.runs.holder, { run_id: runId, claim_id: claimId }, { timeoutMs: 5_000 }),
    attestation: (req) => request(nc, rpc.runs.attestation, req, { timeoutMs: 5_000 }),
  };
}

import {
  rpc,
  subjects,
  type AdmitRequest,
  type AttestationRequest,
  type AttestationResponse,
  type HolderResponse,
  type HostedRepository,
  type Run,
  type RunSignal,
  type RunState,
} from '@threadwork/contracts';
import { publishSignal, request, type NatsConnection } from '@threadwork/platform';
import type { z } from 'zod';

/** getMany takes at most this many ids per request (RunGetManyRequest). */
const GET_MANY_MAX = 1000;

/** The other services threads talks to, through the contracts of libs/contracts/src/internal/ only. */
export interface Peers {
  /** The repositories in the order asked; `not_found` when the owner cannot see one of them. */
  access(ownerId: string, repositoryIds: number[]): Promise<HostedRepository[]>;
  admit(admission: AdmitRequest): Promise<Run>;
  getRun(ownerId: string, runId: string): Promise<Run>;
  /** Runs' states by id; an id runs does not know is missing from the map. */
  getRuns(ownerId: string, runIds: string[]): Promise<Map<string, RunState>>;
  liveRun(ownerId: string, threadId: string): Promise<Run | null>;
  /** How many of the owner's runs are live, counted up to `atMost`. */
  liveCount(ownerId: string, atMost: number): Promise<number>;
  /** Whether a runner's DOMAIN event is one its run's holder published, about that run as it is. */
  attestation(req: z.input<typeof AttestationRequest>): Promise<z.output<typeof AttestationResponse>>;
  /** Whom the live run is for, if `claimId` holds it; `already_settled` (or `not_found`) otherwise. */
  holder(runId: string, claimId: string): Promise<HolderResponse>;
  /** Core-NATS signal to a live run; sent only after the state it announces is stored. */
  signal(runId: string, signal: RunSignal): void;
}

export function createPeers(nc: NatsConnection): Peers {
  return {
    async access(ownerId, repositoryIds) {
      const { repositories } = await request(nc, rpc.repohost.access, {
        owner_id: ownerId,
        repository_ids: repositoryIds,
      });
      return repositories;
    },

    async admit(admission) {
      const { run } = await request(nc, rpc.runs.admit, admission);
      return run;
    },

    getRun: (ownerId, runId) => request(nc, rpc.runs.get, { owner_id: ownerId, run_id: runId }),

    async getRuns(ownerId, runIds) {
      const unique = [...new Set(runIds)];
      const found = new Map<string, RunState>();
      for (let start = 0; start < unique.length; start += GET_MANY_MAX) {
        const { runs } = await request(nc, rpc.runs.getMany, {
          owner_id: ownerId,
          run_ids: unique.slice(start, start + GET_MANY_MAX),
        });
        for (const run of runs) found.set(run.id, run);
      }
      return found;
    },

    async liveRun(ownerId, threadId) {
      const { run } = await request(nc, rpc.runs.live, { owner_id: ownerId, thread_id: threadId });
      return run;
    },

    async liveCount(ownerId, atMost) {
      const { live } = await request(nc, rpc.runs.liveCount, { owner_id: ownerId, at_most: atMost });
      return live;
    },

    attestation: (req) => request(nc, rpc.runs.attestation, req),

    holder: (runId, claimId) => request(nc, rpc.runs.holder, { run_id: runId, claim_id: claimId }),

    signal(runId, signal) {
      publishSignal(nc, subjects.runSignal(runId), signal);
    },
  };
}

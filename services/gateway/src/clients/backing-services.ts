import type { RpcEndpoint } from '@threadwork/contracts';
import { request, type NatsConnection } from '@threadwork/platform';
import type { z } from 'zod';

/** The backing services (threads, runs, repohost, review), reached by request/reply over NATS. */
export interface BackingServices {
  /** One request to a backing service; no answer within the timeout becomes `unavailable` (503). */
  request<E extends RpcEndpoint>(endpoint: E, payload: z.input<E['request']>): Promise<z.output<E['response']>>;
}

export function backingServices(nc: NatsConnection, timeoutMs: number): BackingServices {
  return {
    request: (endpoint, payload) => request(nc, endpoint, payload, { timeoutMs }),
  };
}

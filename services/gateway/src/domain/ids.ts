import { randomUUID } from 'node:crypto';

export type IdPrefix = 'usr' | 'key';

/** `<prefix>_<32 hex>`: the type shows in logs, the random part makes ids unguessable and collision-free. */
export function newId(prefix: IdPrefix): string {
  return `${prefix}_${randomUUID().replace(/-/g, '')}`;
}

/** A request's id (X-Request-Id, `request_id` in every service's log): made here, never taken from the client. */
export function newRequestId(): string {
  return randomUUID();
}

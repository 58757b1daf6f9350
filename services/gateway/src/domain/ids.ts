import { randomUUID } from 'node:crypto';
import { newId as makeId } from '@threadwork/platform';

export type IdPrefix = 'usr' | 'key';

/** A new id of one of this service's types, `<prefix>_<32 hex>` as every service makes them. */
export function newId(prefix: IdPrefix): string {
  return makeId(prefix);
}

/** A request's id (X-Request-Id, `request_id` in every service's log): made here, never taken from the client. */
export function newRequestId(): string {
  return randomUUID();
}

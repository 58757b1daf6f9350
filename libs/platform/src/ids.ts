import { randomBytes } from 'node:crypto';

/**
 * A new id, `<prefix>_<32 hex>`: the prefix shows its type in logs, the 128 random bits make it
 * unguessable and collision-free. Each service names its own prefixes (its `domain/ids.ts`).
 */
export function newId(prefix: string): string {
  return `${prefix}_${randomBytes(16).toString('hex')}`;
}

import { randomBytes } from 'node:crypto';

/** A new id: its type as a prefix and 128 random bits in hex, e.g. `run_3f9c…`. */
export function newId(prefix: 'run' | 'int'): string {
  return `${prefix}_${randomBytes(16).toString('hex')}`;
}

import { randomBytes } from 'node:crypto';

export type IdPrefix = 'thr' | 'msg' | 'run' | 'prj' | 'prr' | 'ctl';

/** `<prefix>_<32 hex>`: the type shows in logs, the random part makes ids unguessable and collision-free. */
export function newId(prefix: IdPrefix): string {
  return `${prefix}_${randomBytes(16).toString('hex')}`;
}

import { newId as makeId } from '@threadwork/platform';

export type IdPrefix = 'thr' | 'msg' | 'run' | 'prj' | 'prr' | 'ctl';

/** A new id of one of this service's types, `<prefix>_<32 hex>` as every service makes them. */
export function newId(prefix: IdPrefix): string {
  return makeId(prefix);
}

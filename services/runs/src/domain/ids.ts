import { newId as makeId } from '@threadwork/platform';

/** A new id of one of this service's types, `<prefix>_<32 hex>` as every service makes them, e.g. `run_3f9c…`. */
export function newId(prefix: 'run' | 'int'): string {
  return makeId(prefix);
}

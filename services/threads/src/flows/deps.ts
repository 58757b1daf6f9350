import type { HarnessCatalog } from '@threadwork/contracts';
import type { Logger } from '@threadwork/platform';
import type { ThreadsStore } from '../store/store.js';
import type { Peers } from '../clients/peers.js';
import type { SerialByKey } from '../domain/limits.js';

// The per-user limits (config.ts): each is checked before the request writes anything, so a
// refused request leaves nothing behind. The checks that end in an admission run under
// `deps.serial` for the user (see SerialByKey), so two of one user's requests cannot both see the
// last free place on this replica.

export interface Limits {
  /** MAX_LIVE_RUNS_PER_USER; 0: none. */
  liveRunsPerUser: number;
  /** THREADS_PER_MINUTE_PER_USER; 0: none. */
  threadsPerMinute: number;
}

export interface Deps {
  store: ThreadsStore;
  peers: Peers;
  logger: Logger;
  /** The harnesses the deployment serves, with the models and efforts each takes (HARNESSES, …). */
  harnesses: HarnessCatalog;
  limits: Limits;
  /** One admission decision at a time per user on this replica (keyed by owner id). */
  serial: SerialByKey;
}

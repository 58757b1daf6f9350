// How long an exec into the pod may take. Whatever runs there is the agent's to stall (a process
// that stops each new shell, a git filter that sleeps), so every exec of a script or a bundle has
// a deadline past which the runner cuts it off; the harness's exec and the bridge's are long-lived
// and have none.

/** Moving a bundle in or out of the pod: a workspace of hundreds of MiB over the exec API. */
export const BUNDLE_TIMEOUT_MS = 10 * 60_000;
/** A script run in the pod: a measurement, a listing, a signal, a sweep (which itself waits a few seconds at most). */
export const SCRIPT_TIMEOUT_MS = 2 * 60_000;

export interface Deadline {
  /** Aborted when the deadline passes or `signal` (if any) aborts. */
  signal: AbortSignal;
  /** Whether it was the deadline that passed. */
  expired(): boolean;
  clear(): void;
}

/** A signal aborted after `ms`, or with `signal`; clear it once the exec is over. */
export function deadline(ms: number, signal?: AbortSignal): Deadline {
  const abort = new AbortController();
  let expired = false;
  const timer = setTimeout(() => {
    expired = true;
    abort.abort();
  }, ms);
  const follow = () => abort.abort();
  signal?.addEventListener('abort', follow, { once: true });
  if (signal?.aborted) abort.abort();
  return {
    signal: abort.signal,
    expired: () => expired,
    clear() {
      clearTimeout(timer);
      signal?.removeEventListener('abort', follow);
    },
  };
}

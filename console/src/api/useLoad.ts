import { useEffect } from 'react';

/**
 * Runs `load` once the page shows and again whenever it changes (new parameters), aborting the
 * previous one; a failure other than that abort goes to `onFailure` for the page to show.
 */
export function useLoad(load: (signal: AbortSignal) => Promise<unknown>, onFailure: (message: string) => void): void {
  useEffect(() => {
    const abort = new AbortController();
    load(abort.signal).catch((err: unknown) => {
      if (!abort.signal.aborted) onFailure(String(err));
    });
    return () => abort.abort();
  }, [load, onFailure]);
}

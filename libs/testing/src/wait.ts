export interface WaitOptions {
  /**
   * Counts a thrown error as "not yet" and names the last one if the guard passes: for waits
   * across an outage caused on purpose, where the API answers errors for a while.
   */
  tolerateErrors?: boolean;
  /** Pause between checks: longer where many tests poll at once and the polling must not be the load. */
  intervalMs?: number;
}

/**
 * Polls until `check` returns a truthy value and returns it. Tests wait on conditions, never on
 * time: `timeoutMs` is only a hang guard, generous for a loaded machine.
 */
export async function waitFor<T>(
  what: string,
  check: () => Promise<T | undefined | null | false> | T | undefined | null | false,
  timeoutMs = 60_000,
  { tolerateErrors = false, intervalMs = 50 }: WaitOptions = {},
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value) return value;
    } catch (err) {
      if (!tolerateErrors) throw err;
      last = err;
    }
    if (Date.now() > deadline) {
      const cause = last === undefined ? '' : ` (last error: ${last instanceof Error ? last.message : String(last)})`;
      throw new Error(`timed out waiting for ${what}${cause}`);
    }
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}

import type { RunError, RunEventPage, RunStatus } from '@threadwork/contracts';

/** One event as read from the log, with how many events of the run follow it. */
export interface LoggedEvent {
  /** The event's JetStream stream sequence (see `assemblePage`). */
  sequence: number;
  chunk: unknown;
  created_at: string;
  /** Events of the same run stored after this one; -1 when the server did not say. */
  pending: number;
}

export interface RunState {
  status: RunStatus;
  error: RunError | null;
  terminal: boolean;
}

/**
 * Builds a page of a run's log. An event's `sequence` is its RUN_EVENTS stream sequence: the
 * stream holds every run's events, so one run's sequences increase strictly but are not
 * contiguous (other runs' events sit in the gaps). `next_sequence` is the last sequence + 1
 * (or `from` when the page is empty). `terminal` is true only when the run is terminal and the
 * page reaches the end of the log — the run state must have been read before the events, so a
 * run seen terminal already has its terminal event in the log.
 */
export function assemblePage(run: RunState, from: number, limit: number, events: readonly LoggedEvent[]): RunEventPage {
  const last = events.at(-1);
  // A page can also end early on its byte budget; `pending` is what tells the end of the log.
  const reachedEnd = last === undefined || last.pending === 0 || (last.pending < 0 && events.length < limit);
  return {
    events: events.map(({ sequence, chunk, created_at }) => ({ sequence, chunk, created_at })),
    next_sequence: last === undefined ? from : last.sequence + 1,
    status: run.status,
    terminal: run.terminal && reachedEnd,
    error: run.error,
  };
}

import { Run, RunEventPage, ThreadWithRun, type RunEvent } from '@threadwork/contracts';
import { waitFor as poll } from '@threadwork/testing';
import type { ChaosUser, Cluster } from './cluster.js';

// What the fault tests ask of the public API, and the invariants they hold its answers to.

export const TERMINAL = ['completed', 'failed', 'cancelled'] as const;

export async function json<T = unknown>(res: Response): Promise<T> {
  const text = await res.text();
  try {
    return JSON.parse(text) as T;
  } catch {
    throw new Error(`${res.status} with a body that is not JSON: ${text.slice(0, 300)}`);
  }
}

export async function createThread(
  cluster: Cluster,
  user: ChaosUser,
  body: { repository_id: number; prompt: string; client_request_id?: string; mode?: string; harness?: string },
): Promise<ThreadWithRun> {
  const res = await cluster.fetch('/v1/threads', { method: 'POST', user, body: JSON.stringify(body) });
  if (res.status !== 202) throw new Error(`POST /v1/threads → ${res.status}: ${await res.text()}`);
  return ThreadWithRun.parse(await res.json());
}

export async function getRun(cluster: Cluster, user: ChaosUser, runId: string): Promise<Run> {
  const res = await cluster.fetch(`/v1/runs/${runId}`, { user });
  if (res.status !== 200) throw new Error(`GET /v1/runs/${runId} → ${res.status}: ${await res.text()}`);
  return Run.parse(await res.json());
}

/** Polls until `check` returns a value; API errors while the chaos lasts count as "not yet". */
export const waitFor = <T>(
  what: string,
  check: () => Promise<T | undefined | null | false> | T | undefined | null | false,
  timeoutMs = 30_000,
  intervalMs = 100,
): Promise<T> => poll(what, check, timeoutMs, { tolerateErrors: true, intervalMs });

export function waitForTerminal(cluster: Cluster, user: ChaosUser, runId: string, timeoutMs = 60_000): Promise<Run> {
  return waitFor(
    `run ${runId} to end`,
    async () => {
      const run = await getRun(cluster, user, runId);
      return run.terminal ? run : undefined;
    },
    timeoutMs,
  );
}

/** One page of a run's events, as a client reads it. */
export async function eventPage(
  cluster: Cluster,
  user: ChaosUser,
  runId: string,
  query: { from?: number; limit?: number; wait?: number } = {},
): Promise<RunEventPage> {
  const params = new URLSearchParams(Object.entries(query).map(([k, v]): [string, string] => [k, String(v)]));
  const res = await cluster.fetch(`/v1/runs/${runId}/events?${params}`, { user });
  if (res.status !== 200) throw new Error(`events of ${runId} → ${res.status}: ${await res.text()}`);
  return RunEventPage.parse(await res.json());
}

/** The whole log of a run, following next_sequence page by page. */
export async function readLog(cluster: Cluster, user: ChaosUser, runId: string): Promise<RunEvent[]> {
  const events: RunEvent[] = [];
  let from = 1;
  for (;;) {
    const page = await eventPage(cluster, user, runId, { from, limit: 500 });
    events.push(...page.events);
    if (page.events.length === 0) return events;
    from = page.next_sequence;
  }
}

const chunkOf = (event: RunEvent) => event.chunk as { type: string; status?: string; attempt?: number };

export const isTerminalStatus = (event: RunEvent) => {
  const chunk = chunkOf(event);
  return chunk.type === 'run.status' && (TERMINAL as readonly string[]).includes(chunk.status ?? '');
};

/**
 * The log invariants every fault must leave intact: sequences strictly increasing (so no
 * duplicate), exactly one terminal status event, and it is the last event.
 */
export function logProblems(events: RunEvent[]): string[] {
  const problems: string[] = [];
  for (let i = 1; i < events.length; i++) {
    if (events[i]!.sequence <= events[i - 1]!.sequence) {
      problems.push(`sequence ${events[i]!.sequence} follows ${events[i - 1]!.sequence}`);
    }
  }
  const terminals = events.filter(isTerminalStatus);
  if (terminals.length !== 1) problems.push(`${terminals.length} terminal status events`);
  if (events.length && !isTerminalStatus(events.at(-1)!))
    problems.push(`the last event is ${chunkOf(events.at(-1)!).type}`);
  return problems;
}

/** `run.status:running@0`-style summary of the status events, for assertions and messages. */
export function statusTrail(events: RunEvent[]): string[] {
  return events
    .map(chunkOf)
    .filter((c) => c.type === 'run.status')
    .map((c) => `${c.status}@${c.attempt ?? '?'}`);
}

/** How many rounds a looped fault runs: CHAOS_ROUNDS when set, else the file's default. */
export function rounds(fileDefault: number): number {
  const fromEnv = Number(process.env.CHAOS_ROUNDS);
  return Number.isInteger(fromEnv) && fromEnv > 0 ? fromEnv : fileDefault;
}

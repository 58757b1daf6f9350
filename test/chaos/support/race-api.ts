// The public API and the runs service's internal one, as the races use them: every call retried as a
// client would when that is safe, and the test standing in for the runner of a run.
import {
  ControlList,
  ErrorBody,
  MessagePage,
  ResumableRun,
  Run,
  RunEventPage,
  Thread,
  ThreadWithRun,
  WorkList,
  rpc,
  type RunEvent,
  type RunStatus,
} from '@threadwork/contracts';
import { request, type NatsConnection } from '@threadwork/platform';
import { newClaimId, uniqueId, RunDriver } from '@threadwork/testing';
import { afterAll, beforeAll } from 'vitest';
import { waitFor } from './api.js';
import { Cluster, type ChaosUser } from './cluster.js';
import { random } from './random.js';

export let cluster: Cluster;
export let user: ChaosUser;
let repoId: number;
let nc: NatsConnection;

/** Starts the deployment the races run against, with no runner; call once at the top of a test file. */
export function useRaceCluster(): void {
  beforeAll(async () => {
    // Races, not latency, are under test: the gateway waits for a busy backing service rather than
    // answering 503 after the default 5 s.
    cluster = await Cluster.start({ runners: 0, env: { REQUEST_TIMEOUT_MS: '30000' } });
    user = cluster.createUser();
    repoId = await cluster.addRepo(user);
    nc = await cluster.connect();
  });
  afterAll(async () => {
    await cluster?.stop();
  });
}

export interface Reply {
  status: number;
  body: unknown;
}

/** Tries of a retried call; with the backoff below, over a minute in all. */
const API_TRIES = 12;

/**
 * One API call. With `retry`, a 503 (a backing service did not answer in time, which a busy
 * machine can cause) or a dropped connection is retried as a client would, backing off: only
 * requests that are safe to repeat (reads, or writes with a client_request_id) ask for it.
 */
export async function api(
  who: ChaosUser,
  method: 'GET' | 'POST',
  path: string,
  body?: unknown,
  { retry = false }: { retry?: boolean } = {},
): Promise<Reply> {
  for (let tries = 1; ; tries++) {
    try {
      const res = await cluster.fetch(path, {
        method,
        user: who,
        ...(body === undefined
          ? method === 'POST'
            ? { headers: { 'content-type': 'text/plain' } }
            : {}
          : { body: JSON.stringify(body) }),
      });
      const text = await res.text();
      const reply = { status: res.status, body: text ? (JSON.parse(text) as unknown) : null };
      if (!retry || reply.status !== 503 || tries >= API_TRIES) return reply;
    } catch (err) {
      if (!retry || tries >= API_TRIES) throw err;
    }
    await new Promise((resolve) => setTimeout(resolve, Math.min(250 * 2 ** tries, 8_000) * (0.5 + random())));
  }
}

export const show = (reply: Reply) => `${reply.status} ${JSON.stringify(reply.body)}`;
export const errorCode = (reply: Reply) => ErrorBody.safeParse(reply.body).data?.error.code;

export async function read<T>(path: string, parse: (body: unknown) => T, who: ChaosUser = user): Promise<T> {
  const reply = await api(who, 'GET', path, undefined, { retry: true });
  if (reply.status !== 200) throw new Error(`GET ${path} → ${show(reply)}`);
  return parse(reply.body);
}

/** Every page of a list (GET /v1/tasks or /v1/work), the largest pages, following `next_cursor`. */
export async function allPages<P extends { next_cursor?: string | null | undefined }>(
  path: string,
  parse: (body: unknown) => P,
  who: ChaosUser = user,
): Promise<P[]> {
  const pages: P[] = [];
  let cursor: string | null | undefined;
  do {
    pages.push(await read(`${path}?limit=200${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`, parse, who));
    cursor = pages.at(-1)!.next_cursor;
  } while (cursor);
  return pages;
}

export const allWorkThreads = async (who: ChaosUser = user) =>
  (await allPages('/v1/work', (b) => WorkList.parse(b), who)).flatMap((page) =>
    page.projects.flatMap((p) => p.threads),
  );

export const runOf = (runId: string) => read(`/v1/runs/${runId}`, (b) => Run.parse(b));

/** The thread's live run as the API reports it (GET /v1/tasks/{id}/runs/resumable), or null. */
export async function liveRunOf(threadId: string, who: ChaosUser = user): Promise<string | null> {
  const reply = await api(who, 'GET', `/v1/tasks/${threadId}/runs/resumable`, undefined, { retry: true });
  if (reply.status === 204) return null;
  if (reply.status !== 200) throw new Error(`resumable run of ${threadId} → ${show(reply)}`);
  return ResumableRun.parse(reply.body).run_id;
}

export const controlsOf = (threadId: string, status?: 'pending' | 'applied') =>
  read(`/v1/threads/${threadId}/controls${status ? `?status=${status}` : ''}`, (b) => ControlList.parse(b).controls);

export const messagesOf = (threadId: string, who: ChaosUser = user) =>
  read(`/v1/threads/${threadId}/messages?limit=200`, (b) => MessagePage.parse(b).messages, who);

/** A run's whole log; one page for an ended run (a page that reaches the end of its log says `terminal`). */
export async function logOf(runId: string, who: ChaosUser = user): Promise<RunEvent[]> {
  const events: RunEvent[] = [];
  for (let from = 1; ;) {
    const page = await read(`/v1/runs/${runId}/events?from=${from}&limit=1000`, (b) => RunEventPage.parse(b), who);
    events.push(...page.events);
    if (page.terminal || page.events.length === 0) return events;
    from = page.next_sequence;
  }
}

export const threadOf = (threadId: string) => read(`/v1/threads/${threadId}`, (b) => Thread.parse(b));

/** Creates a thread; its client_request_id makes a 503 retry the same create. */
export async function create(prompt: string): Promise<ThreadWithRun> {
  const body = { repository_id: repoId, prompt, client_request_id: uniqueId('create-') };
  const reply = await api(user, 'POST', '/v1/threads', body, { retry: true });
  if (reply.status !== 202) throw new Error(`POST /v1/threads → ${show(reply)}`);
  return ThreadWithRun.parse(reply.body);
}

/**
 * `fn` over `items`, at most `limit` at a time, results in order. Setting a race up and checking
 * it afterwards are not what is raced: bounding them keeps FerretDB's queue (one SQLite writer)
 * short on this small machine, so only the race itself runs at full width.
 */
export async function mapLimit<T, R>(items: readonly T[], limit: number, fn: (item: T, index: number) => Promise<R>) {
  const results: R[] = new Array<R>(items.length);
  let next = 0;
  const worker = async () => {
    for (let i = next++; i < items.length; i = next++) results[i] = await fn(items[i]!, i);
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return results;
}

export const chunkOf = (event: RunEvent) => event.chunk as { type: string; status?: string; interaction_id?: string };

/** The status of the log's terminal event (logProblems has checked there is exactly one, last). */
export const loggedOutcome = (events: RunEvent[]) => chunkOf(events.at(-1)!).status;

/**
 * How long the test, as a runner, waits for the runs service. RunDriver's requests give up after
 * 5 s, which a loaded two-core machine can exceed; retrying an unanswered claim would race the
 * claim still in flight, which is not the race under test.
 */
const RUNNER_TIMEOUT_MS = 60_000;

/**
 * The test as the runner of one run, through the runs service's internal API (claim, transition,
 * and RunDriver for interactions), with RUNNER_TIMEOUT_MS to answer.
 */
export class Runner {
  private constructor(
    readonly runId: string,
    readonly attempt: number,
    readonly claimId: string,
  ) {}

  static async claim(runId: string): Promise<Runner> {
    const claimId = newClaimId();
    const claimed = await request(
      nc,
      rpc.runs.claim,
      { run_id: runId, runner_id: 'chaos-races', claim_id: claimId },
      { timeoutMs: RUNNER_TIMEOUT_MS },
    );
    return new Runner(runId, claimed.attempt, claimId);
  }

  /** Claimed (which moves it to `starting`), then running. */
  static async started(runId: string): Promise<Runner> {
    return (await Runner.claim(runId)).start();
  }

  to(status: RunStatus, extra: { error?: { code: string; message: string } } = {}): Promise<Run> {
    return request(
      nc,
      rpc.runs.transition,
      { run_id: this.runId, attempt: this.attempt, claim_id: this.claimId, to: status, ...extra },
      { timeoutMs: RUNNER_TIMEOUT_MS },
    );
  }

  /** starting → running: the harness is up. */
  async start(): Promise<this> {
    await this.to('running');
    return this;
  }

  ask(...args: Parameters<RunDriver['ask']>) {
    return new RunDriver(nc, this.runId, this.attempt, this.claimId).ask(...args);
  }

  settlement(interactionId: string) {
    return new RunDriver(nc, this.runId, this.attempt, this.claimId).settlement(interactionId);
  }
}

/** `waitFor` at a gentle pace: twenty threads poll at once, and the polling must not be the load. */
export const poll = <T>(
  what: string,
  check: () => Promise<T | undefined | null | false>,
  timeoutMs = 60_000,
): Promise<T> => waitFor(what, check, timeoutMs, 500);

export const jitter = (maxMs: number) => new Promise((resolve) => setTimeout(resolve, random() * maxMs));

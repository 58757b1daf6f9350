// The database outage's clients: API requests and direct service calls bounded in time, what
// counts as a right answer while the database is away, and the reads that check what was written.
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import {
  HTTP_STATUS_BY_CODE,
  type MessagePage,
  type RpcEndpoint,
  type RpcRequest,
  type WorkList,
} from '@threadwork/contracts';
import { isAppError, request, type NatsConnection } from '@threadwork/platform';
import { afterAll, beforeAll } from 'vitest';
import { root } from '../../support/process-stack.js';
import { createThread, json, waitFor } from './api.js';
import { Cluster, type ChaosUser } from './cluster.js';

/** The least time the database stays down in a round. */
export const DOWN_MS = 4_000;
/**
 * A hang guard, not a latency target: a request still unanswered after this is a hang. The services
 * answer far sooner (the gateway's own deadline is GATEWAY_REQUEST_TIMEOUT_MS); the slowest answer
 * is reported, and latency targets live in the benchmarks.
 */
export const ANSWER_WITHIN_MS = 60_000;
/** How long the gateway waits for a service (its REQUEST_TIMEOUT_MS default); direct calls do the same. */
export const GATEWAY_REQUEST_TIMEOUT_MS = 5_000;
/** Idle threads per message client: some take their message before the fault, the rest during it. */
export const IDLE_THREADS = 8;

export type HttpKind =
  'tasks' | 'work' | 'run' | 'events' | 'messages' | 'create' | 'message' | 'cancel' | 'healthz' | 'readyz';
/** Direct calls of the services' NATS endpoints, as the gateway (or a runner) makes them. */
export type RpcKind = 'rpc:read' | 'rpc:create' | 'rpc:message' | 'rpc:append';
export type Kind = HttpKind | RpcKind;

export interface Outcome {
  kind: Kind;
  /** performance.now() when the request was sent. */
  startedAt: number;
  /** Path or subject. */
  what: string;
  /** HTTP status (for a direct call: the status its error code maps to), or what went wrong instead. */
  status: number | 'timeout' | 'network';
  ms: number;
  body: unknown;
  retryAfter: string | null;
}

/** A write of the outage, kept to retry through the API and to check afterwards. */
export interface Write {
  kind: 'create' | 'message' | 'cancel';
  /** The API path a retry posts to. */
  path: string;
  body?: Record<string, unknown>;
  /** Create and message: the prompt, unique per request. */
  prompt?: string;
  /** For a message: its thread. */
  threadId?: string;
  outcome: Outcome;
}

export const SUCCESS: Record<Kind, number[]> = {
  tasks: [200],
  work: [200],
  run: [200],
  events: [200],
  messages: [200],
  create: [202],
  message: [202],
  cancel: [200, 202],
  healthz: [200],
  readyz: [200],
  'rpc:read': [200],
  'rpc:create': [200],
  'rpc:message': [200],
  'rpc:append': [200],
};

export let cluster: Cluster;
export let user: ChaosUser;
export let ownerId: string;
export let repoId: number;
export let nc: NatsConnection;

/** Starts the deployment the outages hit, with no runner; call once at the top of a test file. */
export function useOutageCluster(): void {
  beforeAll(async () => {
    cluster = await Cluster.start({ runners: 0 });
    user = cluster.createUser();
    ownerId = userIdOf(user.login);
    repoId = await cluster.addRepo(user);
    nc = await cluster.connect();
  });
  afterAll(async () => {
    // A round that failed while the database was frozen leaves it stopped; a killed one is gone anyway.
    try {
      cluster?.thawFerret();
    } catch {
      // no such process
    }
    await cluster?.stop();
  });
}

/** The user's id, from the admin CLI (the services' internal API names owners by id). */
export function userIdOf(login: string): string {
  const res = spawnSync(process.execPath, [join(root, 'services', 'gateway', 'dist', 'admin.js'), 'users', 'list'], {
    cwd: root,
    env: { ...cluster.env },
    encoding: 'utf8',
    timeout: 30_000,
  });
  const line = res.stdout.split('\n').find((l) => l.split('\t')[1] === login);
  if (res.status !== 0 || !line) throw new Error(`admin users list: ${res.stderr}${res.stdout}`);
  return line.split('\t')[0]!;
}

/** What the outages looked like (answers by kind and status, the slowest), for whoever reads the run. */
export const report = (text: string) => process.stdout.write(`${text}\n`);

/** One API request with a bound on the wait: no answer in time is recorded as `timeout`. */
export async function hit(kind: Kind, path: string, init: RequestInit & { user?: ChaosUser } = {}): Promise<Outcome> {
  const started = performance.now();
  try {
    const res = await cluster.fetch(path, { ...init, signal: AbortSignal.timeout(ANSWER_WITHIN_MS) });
    const text = await res.text();
    let body: unknown = text;
    try {
      body = JSON.parse(text);
    } catch {
      // kept as text for the report
    }
    const retryAfter = res.headers.get('retry-after');
    return {
      kind,
      what: path,
      startedAt: started,
      status: res.status,
      ms: performance.now() - started,
      body,
      retryAfter,
    };
  } catch (err) {
    const timedOut = err instanceof Error && (err.name === 'TimeoutError' || err.name === 'AbortError');
    const status = timedOut ? 'timeout' : 'network';
    return {
      kind,
      what: path,
      startedAt: started,
      status,
      ms: performance.now() - started,
      body: String(err),
      retryAfter: null,
    };
  }
}

/** One direct call of a service endpoint, answered as the gateway would map it. */
export async function call<E extends RpcEndpoint>(
  kind: RpcKind,
  endpoint: E,
  payload: RpcRequest<E>,
): Promise<Outcome> {
  const started = performance.now();
  const outcome = (status: Outcome['status'], body: unknown): Outcome => ({
    kind,
    what: endpoint.subject,
    startedAt: started,
    status,
    ms: performance.now() - started,
    body,
    retryAfter: null,
  });
  try {
    return outcome(200, await request(nc, endpoint, payload, { timeoutMs: GATEWAY_REQUEST_TIMEOUT_MS }));
  } catch (err) {
    if (isAppError(err)) return outcome(HTTP_STATUS_BY_CODE[err.code], { error: err.toJSON() });
    return outcome('network', String(err));
  }
}

export const isUnavailable = (o: Outcome) =>
  o.status === 503 && (o.body as { error?: { code?: unknown } } | null)?.error?.code === 'unavailable';

export const succeeded = (o: Outcome) => typeof o.status === 'number' && SUCCESS[o.kind].includes(o.status);

/** What is wrong with one answer given while the database was (or had just been) down. */
export function problemOf(o: Outcome): string | undefined {
  const where = `${o.kind} ${o.what} → ${o.status} in ${Math.round(o.ms)} ms: ${JSON.stringify(o.body).slice(0, 300)}`;
  if (o.ms >= ANSWER_WITHIN_MS || typeof o.status !== 'number') return `no answer in time: ${where}`;
  if (succeeded(o)) return undefined;
  if (o.kind === 'healthz') return `liveness failed: ${where}`;
  if (o.kind === 'readyz') {
    return o.status === 503 && (o.body as { status?: unknown }).status === 'not_ready'
      ? undefined
      : `readiness: ${where}`;
  }
  if (!isUnavailable(o)) return `neither a success nor 503 unavailable: ${where}`;
  const direct = o.kind.startsWith('rpc:');
  if (!direct && (o.retryAfter === null || !/^\d+$/.test(o.retryAfter))) return `503 without Retry-After: ${where}`;
  return undefined;
}

/** A write retried through the API once the database is back, until it is answered with something other than 503. */
export function retry(write: Write): Promise<Outcome> {
  return waitFor(`a retry of ${write.kind} ${write.path} to be answered`, async () => {
    const o = await hit(write.kind, write.path, {
      method: 'POST',
      user,
      ...(write.body ? { body: JSON.stringify(write.body) } : {}),
    });
    return o.status === 503 ? undefined : o;
  });
}

/** Every page of a list (GET /v1/tasks or /v1/work), the largest pages, following `next_cursor`. */
export async function allPages<P extends { next_cursor?: string | null | undefined }>(path: string): Promise<P[]> {
  const pages: P[] = [];
  let cursor: string | null | undefined;
  do {
    const url = `${path}?limit=200${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`;
    const res = await cluster.fetch(url, { user });
    if (res.status !== 200) throw new Error(`GET ${url} → ${res.status}: ${await res.text()}`);
    pages.push(await json<P>(res));
    cursor = pages.at(-1)!.next_cursor;
  } while (cursor);
  return pages;
}

/** The whole work list, its pages' projects one after another. */
export async function workList(): Promise<WorkList> {
  return { projects: (await allPages<WorkList>('/v1/work')).flatMap((page) => page.projects) };
}

export async function messagesOf(threadId: string): Promise<MessagePage['messages']> {
  const all: MessagePage['messages'] = [];
  let cursor: string | null = null;
  do {
    const query: string = cursor ? `?limit=200&cursor=${encodeURIComponent(cursor)}` : '?limit=200';
    const res = await cluster.fetch(`/v1/threads/${threadId}/messages${query}`, { user });
    if (res.status !== 200) throw new Error(`messages of ${threadId} → ${res.status}: ${await res.text()}`);
    const page = await json<MessagePage>(res);
    all.push(...page.messages);
    cursor = page.next_cursor;
  } while (cursor);
  return all;
}

export const textOf = (message: MessagePage['messages'][number]) =>
  message.parts.map((p) => (p as { text?: string }).text ?? '').join('');

/** A thread with its first run cancelled at once (no runner has it): idle, ready for a message. */
export async function idleThread(round: number, n: number): Promise<string> {
  const thread = await createThread(cluster, user, { repository_id: repoId, prompt: `idle r${round} #${n}` });
  const res = await cluster.fetch(`/v1/runs/${thread.run_id}/cancel`, { method: 'POST', user });
  if (res.status !== 202 && res.status !== 200) throw new Error(`cancel → ${res.status}: ${await res.text()}`);
  return thread.id;
}

export const delta = (key: string) => ({ key, chunk: { type: 'message.delta', item_id: 'outage', delta: `[${key}]` } });

export const range = (n: number) => Array.from({ length: n }, (_, i) => i);

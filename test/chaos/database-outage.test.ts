import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import {
  HTTP_STATUS_BY_CODE,
  rpc,
  type MessagePage,
  type RpcEndpoint,
  type RpcRequest,
  type TaskList,
  type WorkList,
} from '@threadwork/contracts';
import { isAppError, request, type NatsConnection } from '@threadwork/platform';
import { uniqueId, RunDriver } from '@threadwork/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { root } from '../support/process-stack.js';
import { createThread, getRun, json, logProblems, readLog, statusTrail, waitFor } from './support/api.js';
import { Cluster, type ChaosUser } from './support/cluster.js';

// Fault 2: the database goes away for a few seconds while clients keep calling — killed
// (`kill -9`: connections refused) or frozen (`SIGSTOP`: connections hang, like a partition).
// Every answer is a correct one or 503 `unavailable` with Retry-After — never a 500, never a hang
// — /healthz stays up and /readyz says not ready. The services behind the gateway are called
// directly too, as the gateway calls them once a caller is authenticated: their error envelope
// must say `unavailable`. Once the database is back the same processes answer again (nothing is
// restarted), and nothing is half-written: a write that got a 503, retried with its
// client_request_id, converges on exactly one thread, run and message; one never retried is
// either absent or whole; a run that was live across the outage ends with one ordered log and one
// terminal event, each of its events stored once.

const ROUNDS = Number(process.env.CHAOS_ROUNDS ?? 2);
/** The least time the database stays down in a round. */
const DOWN_MS = 4_000;
/**
 * A hang guard, not a latency target: a request still unanswered after this is a hang. The services
 * answer far sooner (the gateway's own deadline is GATEWAY_REQUEST_TIMEOUT_MS); the slowest answer
 * is reported, and latency targets live in the benchmarks.
 */
const ANSWER_WITHIN_MS = 60_000;
/** How long the gateway waits for a service (its REQUEST_TIMEOUT_MS default); direct calls do the same. */
const GATEWAY_REQUEST_TIMEOUT_MS = 5_000;
/** Idle threads per message client: some take their message before the fault, the rest during it. */
const IDLE_THREADS = 8;

type HttpKind =
  'tasks' | 'work' | 'run' | 'events' | 'messages' | 'create' | 'message' | 'cancel' | 'healthz' | 'readyz';
/** Direct calls of the services' NATS endpoints, as the gateway (or a runner) makes them. */
type RpcKind = 'rpc:read' | 'rpc:create' | 'rpc:message' | 'rpc:append';
type Kind = HttpKind | RpcKind;

interface Outcome {
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
interface Write {
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

const SUCCESS: Record<Kind, number[]> = {
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

let cluster: Cluster;
let user: ChaosUser;
let ownerId: string;
let repoId: number;
let nc: NatsConnection;

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

/** The user's id, from the admin CLI (the services' internal API names owners by id). */
function userIdOf(login: string): string {
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
const report = (text: string) => process.stdout.write(`${text}\n`);

/** One API request with a bound on the wait: no answer in time is recorded as `timeout`. */
async function hit(kind: Kind, path: string, init: RequestInit & { user?: ChaosUser } = {}): Promise<Outcome> {
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
async function call<E extends RpcEndpoint>(kind: RpcKind, endpoint: E, payload: RpcRequest<E>): Promise<Outcome> {
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

const isUnavailable = (o: Outcome) =>
  o.status === 503 && (o.body as { error?: { code?: unknown } } | null)?.error?.code === 'unavailable';

const succeeded = (o: Outcome) => typeof o.status === 'number' && SUCCESS[o.kind].includes(o.status);

/** What is wrong with one answer given while the database was (or had just been) down. */
function problemOf(o: Outcome): string | undefined {
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
function retry(write: Write): Promise<Outcome> {
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
async function allPages<P extends { next_cursor?: string | null | undefined }>(path: string): Promise<P[]> {
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
async function workList(): Promise<WorkList> {
  return { projects: (await allPages<WorkList>('/v1/work')).flatMap((page) => page.projects) };
}

async function messagesOf(threadId: string): Promise<MessagePage['messages']> {
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

const textOf = (message: MessagePage['messages'][number]) =>
  message.parts.map((p) => (p as { text?: string }).text ?? '').join('');

/** A thread with its first run cancelled at once (no runner has it): idle, ready for a message. */
async function idleThread(round: number, n: number): Promise<string> {
  const thread = await createThread(cluster, user, { repository_id: repoId, prompt: `idle r${round} #${n}` });
  const res = await cluster.fetch(`/v1/runs/${thread.run_id}/cancel`, { method: 'POST', user });
  if (res.status !== 202 && res.status !== 200) throw new Error(`cancel → ${res.status}: ${await res.text()}`);
  return thread.id;
}

const delta = (key: string) => ({ key, chunk: { type: 'message.delta', item_id: 'outage', delta: `[${key}]` } });

const range = (n: number) => Array.from({ length: n }, (_, i) => i);

/**
 * ROUNDS outages of one kind: `killed` (`kill -9`, then started again on the same store: connections
 * are refused) or `frozen` (`SIGSTOP`, then `SIGCONT`: connections hang, as in a network partition).
 */
async function outages(fault: 'killed' | 'frozen'): Promise<void> {
  const pids = new Map([...cluster.services.values()].map((proc) => [proc.name, proc.pid]));
  let worstMs = 0;
  let answered = 0;

  for (let round = 0; round < ROUNDS; round++) {
    // --- Before: threads in each state the outage's requests need, and a run held by a "runner".
    const idle = await Promise.all(range(IDLE_THREADS).map((n) => idleThread(round, n)));
    const idleForCalls = await Promise.all(range(IDLE_THREADS).map((n) => idleThread(round, 100 + n)));
    const queued = await Promise.all(
      range(6).map((n) => createThread(cluster, user, { repository_id: repoId, prompt: `queued r${round} #${n}` })),
    );
    const liveThread = await createThread(cluster, user, { repository_id: repoId, prompt: `live r${round}` });
    const projectRepositoryId = (await workList()).projects.find((p) => p.threads.some((t) => t.id === liveThread.id))!
      .repositories[0]!.id;
    const driver = await RunDriver.claim(nc, liveThread.run_id, `outage-driver-${round}`);
    await driver.start();
    await driver.say('before the outage');

    // --- Clients of every kind start calling; once writes are going through, the database goes
    // away under them (some are cut half-way), and they keep calling through the outage and the
    // recovery.
    const outcomes: Outcome[] = [];
    const writes: Write[] = [];
    const appendKeys: { key: string; ok: boolean }[] = [];
    /** Kinds answered 503 (healthz: 200) while the database was away, and answered well after it came back. */
    const sawOutage = new Set<Kind>();
    const sawRecovery = new Set<Kind>();
    let downAt = Infinity;
    let restoredAt = Infinity;
    let calling = true;

    // Clients that keep calling, with a short pause between calls (a flood is not the point).
    const loop = async (body: () => Promise<void>) => {
      while (calling) {
        await body();
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    };
    const record = (o: Outcome) => {
      outcomes.push(o);
      if (o.startedAt >= downAt && o.startedAt < restoredAt) {
        if (o.kind === 'healthz' ? o.status === 200 : isUnavailable(o) || (o.kind === 'readyz' && o.status === 503)) {
          sawOutage.add(o.kind);
        }
      }
      if (o.startedAt >= restoredAt && succeeded(o)) sawRecovery.add(o.kind);
      return o;
    };
    const reads: [HttpKind, (n: number) => string][] = [
      ['tasks', () => '/v1/tasks'],
      ['work', () => '/v1/work'],
      ['run', (n) => `/v1/runs/${queued[n % queued.length]!.run_id}`],
      ['events', () => `/v1/runs/${liveThread.run_id}/events?from=1`],
      ['messages', (n) => `/v1/threads/${queued[n % queued.length]!.id}/messages`],
    ];
    const directReads: (() => Promise<Outcome>)[] = [
      () => call('rpc:read', rpc.threads.list, { owner_id: ownerId }),
      () => call('rpc:read', rpc.threads.messages, { owner_id: ownerId, thread_id: queued[0]!.id, limit: 50 }),
      () => call('rpc:read', rpc.runs.get, { owner_id: ownerId, run_id: queued[1]!.run_id }),
      () => call('rpc:read', rpc.runs.eventsPage, { owner_id: ownerId, run_id: liveThread.run_id, from: 1, limit: 10 }),
      () => call('rpc:read', rpc.repohost.access, { owner_id: ownerId, repository_ids: [repoId] }),
      () =>
        call('rpc:read', rpc.review.get, {
          owner_id: ownerId,
          thread_id: liveThread.id,
          project_repository_id: projectRepositoryId,
        }),
    ];
    let creates = 0;
    let messages = 0;
    let directMessages = 0;
    let cancels = 0;
    let appends = 0;
    let directReadsMade = 0;
    const workers = [
      // API reads: one client per kind.
      ...reads.map(([kind, path]) => {
        let n = 0;
        return loop(async () => {
          record(await hit(kind, path(n++), { user }));
        });
      }),
      loop(async () => {
        record(await hit('healthz', '/healthz'));
      }),
      loop(async () => {
        record(await hit('readyz', '/readyz'));
      }),
      // New threads through the API, each with a request id of its own.
      loop(async () => {
        const prompt = `outage r${round} create #${creates++} ${uniqueId()}`;
        const body = { repository_id: repoId, prompt, client_request_id: uniqueId('req') };
        const o = record(await hit('create', '/v1/threads', { method: 'POST', user, body: JSON.stringify(body) }));
        writes.push({ kind: 'create', path: '/v1/threads', body, prompt, outcome: o });
      }),
      // The same, straight to the threads service (as the gateway sends it for an authenticated caller).
      loop(async () => {
        const prompt = `outage r${round} direct create #${creates++} ${uniqueId()}`;
        const body = { repository_id: repoId, prompt, client_request_id: uniqueId('req') };
        const o = record(await call('rpc:create', rpc.threads.create, { owner_id: ownerId, view: 'thread', body }));
        writes.push({ kind: 'create', path: '/v1/threads', body, prompt, outcome: o });
      }),
      // One message per idle thread, through the API and straight to the service.
      loop(async () => {
        const threadId = idle[messages++];
        if (!threadId) return;
        const prompt = `outage r${round} message ${uniqueId()}`;
        const body = { prompt, client_request_id: uniqueId('req') };
        const path = `/v1/threads/${threadId}/messages`;
        const o = record(await hit('message', path, { method: 'POST', user, body: JSON.stringify(body) }));
        writes.push({ kind: 'message', path, body, prompt, threadId, outcome: o });
      }),
      loop(async () => {
        const threadId = idleForCalls[directMessages++];
        if (!threadId) return;
        const prompt = `outage r${round} direct message ${uniqueId()}`;
        const body = { prompt, client_request_id: uniqueId('req') };
        const o = record(
          await call('rpc:message', rpc.threads.message, { owner_id: ownerId, thread_id: threadId, body }),
        );
        writes.push({ kind: 'message', path: `/v1/threads/${threadId}/messages`, body, prompt, threadId, outcome: o });
      }),
      // Cancels of queued runs.
      loop(async () => {
        const path = `/v1/runs/${queued[cancels++ % queued.length]!.run_id}/cancel`;
        const o = record(await hit('cancel', path, { method: 'POST', user }));
        writes.push({ kind: 'cancel', path, outcome: o });
      }),
      // The services' reads, called directly.
      loop(async () => {
        record(await directReads[directReadsMade++ % directReads.length]!());
      }),
      // The live run's "runner" keeps reporting, each event under a key of its own.
      loop(async () => {
        const key = `outage-${round}-${appends++}`;
        const o = record(
          await call('rpc:append', rpc.runs.append, {
            run_id: driver.runId,
            attempt: driver.attempt,
            claim_id: driver.claimId,
            events: [delta(key)],
          }),
        );
        appendKeys.push({ key, ok: succeeded(o) });
      }),
    ];
    const outageKinds: Kind[] = [
      'tasks',
      'run',
      'events',
      'messages',
      'create',
      'message',
      'cancel',
      'healthz',
      'readyz',
      'rpc:read',
      'rpc:create',
      'rpc:message',
      'rpc:append',
    ];
    const recoveryKinds: Kind[] = [
      'tasks',
      'run',
      'events',
      'create',
      'cancel',
      'readyz',
      'rpc:read',
      'rpc:create',
      'rpc:append',
    ];
    const phase = async (what: string, until: () => boolean, kinds: Kind[], seen: Set<Kind>) => {
      try {
        await waitFor(what, until, 60_000);
      } catch (err) {
        const missing = kinds.filter((k) => !seen.has(k));
        calling = false;
        throw new Error(`${(err as Error).message}; not seen: ${missing.join(', ')}\n${cluster.logs()}`);
      }
    };
    const writesGoingThrough = () =>
      ['create', 'rpc:create'].every((k) => outcomes.some((o) => o.kind === k && succeeded(o)));
    await phase('writes to go through', writesGoingThrough, [], new Set());

    if (fault === 'killed') await cluster.stopFerret();
    else cluster.freezeFerret();
    downAt = performance.now();
    await phase(
      'every kind of request to be answered while the database is away',
      () => performance.now() - downAt >= DOWN_MS && outageKinds.every((k) => sawOutage.has(k)),
      outageKinds,
      sawOutage,
    );

    // --- Recovery, by the same processes: every kind of request is answered well again.
    if (fault === 'killed') await cluster.startFerret();
    else cluster.thawFerret();
    restoredAt = performance.now();
    await phase(
      'every kind of request to be answered well again',
      () => recoveryKinds.every((k) => sawRecovery.has(k)),
      recoveryKinds,
      sawRecovery,
    );
    const recoveredAt = performance.now();
    calling = false;
    await Promise.all(workers);

    // What came back, by kind, status and message, with the slowest answer of each.
    const tally = new Map<string, { n: number; worst: number }>();
    for (const o of outcomes) {
      const message = (o.body as { error?: { message?: string } } | null)?.error?.message ?? '';
      const key = `${o.kind} ${o.status} ${message.replace(/[a-z]+_[0-9a-f]{32}/g, '…')}`;
      const tallied = tally.get(key) ?? { n: 0, worst: 0 };
      tally.set(key, { n: tallied.n + 1, worst: Math.max(tallied.worst, o.ms) });
    }
    report(
      `database ${fault}, round ${round}: away ${Math.round(restoredAt - downAt)} ms, ` +
        `every kind answered well again ${Math.round(recoveredAt - restoredAt)} ms after it came back\n` +
        [...tally].map(([k, { n, worst }]) => `  ${n}× ${k} (slowest ${Math.round(worst)} ms)`).join('\n'),
    );
    const problems = outcomes.map(problemOf).filter((p): p is string => p !== undefined);
    expect(problems, cluster.logs()).toEqual([]);
    for (const o of outcomes) worstMs = Math.max(worstMs, o.ms);
    answered += outcomes.length;

    await waitFor('the gateway to be ready again', async () => (await cluster.fetch('/readyz')).status === 200, 60_000);
    for (const proc of cluster.services.values()) {
      expect(proc.alive(), `${proc.name} is running`).toBe(true);
      expect(proc.pid, `${proc.name} was not restarted`).toBe(pids.get(proc.name));
      if (proc.env.HEALTH_PORT === '0') continue;
      await waitFor(`${proc.name} to be ready again`, async () => {
        const res = await fetch(`http://127.0.0.1:${proc.env.HEALTH_PORT}/readyz`, {
          signal: AbortSignal.timeout(5_000),
        });
        return res.status === 200;
      });
    }

    // --- Nothing half-written.
    // Creates: every one that succeeded, and every other one that got 503 retried through the API
    // with its request id (twice: the same ids both times).
    const createWrites = writes.filter((w) => w.kind === 'create');
    const failedCreates = createWrites.filter((w) => !succeeded(w.outcome));
    const abandonedCreates = failedCreates.filter((_, i) => i % 2 === 1);
    const created = new Map<string, { thread_id: string; run_id: string; message_id: string }>();
    for (const w of createWrites) {
      if (abandonedCreates.includes(w)) continue;
      let answer = w.outcome;
      if (!succeeded(w.outcome)) {
        answer = await retry(w);
        expect(answer.status, JSON.stringify(answer.body)).toBe(202);
        const again = await retry(w);
        const [a, b] = [answer.body, again.body] as { id: string; run_id: string; message_id: string }[];
        expect([again.status, b!.id, b!.run_id, b!.message_id]).toEqual([202, a!.id, a!.run_id, a!.message_id]);
      }
      const ids = answer.body as { id: string; run_id: string; message_id: string };
      created.set(w.prompt!, { thread_id: ids.id, run_id: ids.run_id, message_id: ids.message_id });
    }
    // Messages: every one that got 503 retried.
    const sent = new Map<string, { thread_id: string; run_id: string; message_id: string }>();
    for (const w of writes.filter((m) => m.kind === 'message')) {
      const answer = succeeded(w.outcome) ? w.outcome : await retry(w);
      expect(succeeded(answer), JSON.stringify(answer.body)).toBe(true);
      const ids = answer.body as { run_id: string; message_id: string };
      sent.set(w.prompt!, { thread_id: w.threadId!, run_id: ids.run_id, message_id: ids.message_id });
    }
    // Cancels: retried; each run asked ends cancelled.
    for (const w of writes.filter((c) => c.kind === 'cancel' && !succeeded(c.outcome))) {
      const answer = await retry(w);
      expect([200, 202], JSON.stringify(answer.body)).toContain(answer.status);
    }
    for (const thread of queued) {
      if (!writes.some((w) => w.kind === 'cancel' && w.path.includes(thread.run_id))) continue;
      const run = await waitFor(`run ${thread.run_id} to be cancelled`, async () => {
        const r = await getRun(cluster, user, thread.run_id);
        return r.terminal ? r : undefined;
      });
      expect(run.status).toBe('cancelled');
    }

    // The work list and the task list agree, list each thread once, and every thread has its run.
    // (Read until two reads agree: a run-status event redelivered after the outage may still be
    // recording the run of a create whose caller gave up, which makes that thread appear.)
    const listed = await waitFor('the work list and the task list to agree', async () => {
      const threads = (await workList()).projects.flatMap((p) => p.threads);
      const tasks = (await allPages<TaskList>('/v1/tasks')).flatMap((page) => page.tasks);
      const [a, b] = [threads.map((t) => t.id).sort(), tasks.map((t) => t.id).sort()];
      return JSON.stringify(a) === JSON.stringify(b) ? threads : undefined;
    });
    expect(new Set(listed.map((t) => t.id)).size, 'a thread listed twice').toBe(listed.length);
    for (const thread of listed) {
      expect(thread.latest_run, `thread ${thread.id} has no run`).not.toBeNull();
      expect((await getRun(cluster, user, thread.latest_run!.id)).thread_id).toBe(thread.id);
    }
    // One thread per create request, with its run and its one first message.
    for (const [prompt, ids] of created) {
      expect(
        listed.filter((t) => t.prompt === prompt).map((t) => t.id),
        prompt,
      ).toEqual([ids.thread_id]);
      const run = await getRun(cluster, user, ids.run_id);
      expect([run.thread_id, run.message_id]).toEqual([ids.thread_id, ids.message_id]);
      const shown = await messagesOf(ids.thread_id);
      expect(
        shown.map((m) => [m.id, textOf(m)]),
        prompt,
      ).toEqual([[ids.message_id, prompt]]);
    }
    // A create that got 503 and was never retried: absent, or whole (its run, its one message).
    for (const w of abandonedCreates) {
      const matching = listed.filter((t) => t.prompt === w.prompt);
      expect(matching.length, `${w.prompt} listed more than once`).toBeLessThanOrEqual(1);
      const [thread] = matching;
      if (!thread) continue;
      const run = await getRun(cluster, user, thread.latest_run!.id);
      // Shown once its run is recorded; a recorder cut off by the outage is caught up by the run's event.
      const shown = await waitFor(`the first message of ${thread.id}`, async () => {
        const m = await messagesOf(thread.id);
        return m.length > 0 ? m : undefined;
      });
      expect(shown.map((m) => [m.id, textOf(m)])).toEqual([[run.message_id, w.prompt]]);
    }
    // Each idle thread: its first message, then the one sent during the outage — once, with its run.
    for (const [prompt, ids] of sent) {
      const run = await getRun(cluster, user, ids.run_id);
      expect([run.thread_id, run.message_id]).toEqual([ids.thread_id, ids.message_id]);
      const shown = await messagesOf(ids.thread_id);
      expect(shown.map(textOf), prompt).toEqual([expect.stringMatching(/^idle r/), prompt]);
      expect(shown[1]!.id).toBe(ids.message_id);
    }

    // --- The run that was live across the outage: every event stored once, one terminal event.
    for (const { key } of appendKeys.filter((k) => !k.ok)) {
      await waitFor(`append ${key} to be taken`, async () =>
        succeeded(
          await call('rpc:append', rpc.runs.append, {
            run_id: driver.runId,
            attempt: driver.attempt,
            claim_id: driver.claimId,
            events: [delta(key)],
          }),
        ),
      );
    }
    await waitFor('the live run to be completed', async () => (await driver.to('completed')).terminal);
    const events = await readLog(cluster, user, liveThread.run_id);
    expect(logProblems(events), cluster.logs()).toEqual([]);
    expect(statusTrail(events).at(-1)).toBe('completed@0');
    const deltas = events
      .map((e) => e.chunk as { type: string; item_id?: string; delta?: string })
      .filter((c) => c.type === 'message.delta' && c.item_id === 'outage')
      .map((c) => c.delta);
    expect(deltas.sort()).toEqual(appendKeys.map((k) => `[${k.key}]`).sort());
    expect((await getRun(cluster, user, liveThread.run_id)).status).toBe('completed');
  }

  report(`database ${fault}: ${answered} answers in ${ROUNDS} outages; the slowest took ${Math.round(worstMs)} ms`);
}

describe('the database down for a few seconds', () => {
  it('killed: 503 unavailable (never 500, never a hang), recovers without a restart, nothing half-written', () =>
    outages('killed'));

  it('frozen: the same when connections hang instead of being refused', () => outages('frozen'));
});

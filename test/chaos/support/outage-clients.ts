// One round of the database outage: the threads it starts from, then clients of every kind calling
// while the database goes away and comes back.
import { rpc } from '@threadwork/contracts';
import { uniqueId, RunDriver } from '@threadwork/testing';
import { createThread, waitFor } from './api.js';
import type { ThreadWithRun } from '@threadwork/contracts';
import {
  call,
  cluster,
  delta,
  DOWN_MS,
  hit,
  IDLE_THREADS,
  idleThread,
  isUnavailable,
  nc,
  ownerId,
  range,
  repoId,
  report,
  succeeded,
  user,
  workList,
} from './outage.js';
import type { HttpKind, Kind, Outcome, Write } from './outage.js';

/** What a round starts from: threads in each state the outage's requests need, and a run held by a "runner". */
export interface RoundSetup {
  idle: string[];
  idleForCalls: string[];
  queued: ThreadWithRun[];
  liveThread: ThreadWithRun;
  projectRepositoryId: string;
  driver: RunDriver;
}

export async function prepareRound(round: number): Promise<RoundSetup> {
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
  return { idle, idleForCalls, queued, liveThread, projectRepositoryId, driver };
}

/** What the clients sent and were answered through one outage and its recovery. */
export interface RoundCalls {
  outcomes: Outcome[];
  writes: Write[];
  appendKeys: { key: string; ok: boolean }[];
}

/**
 * Clients of every kind start calling; once writes are going through, the database goes away under
 * them (some are cut half-way), and they keep calling through the outage and the recovery.
 */
export async function callThroughOutage(
  fault: 'killed' | 'frozen',
  round: number,
  setup: RoundSetup,
): Promise<RoundCalls> {
  const { idle, idleForCalls, queued, liveThread, projectRepositoryId, driver } = setup;
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
      throw new Error(
        `${(err as Error).message}; not seen: ${missing.join(', ')}; ${databaseStates()}\n${cluster.logs()}`,
      );
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
  return { outcomes, writes, appendKeys };
}

/**
 * Each service's last word on the database (README "Observe"), on one line: which had it back,
 * which not and why, where a failure's first line shows it.
 */
function databaseStates(): string {
  return [...cluster.services.values()]
    .map((proc) => {
      const said = proc
        .output()
        .split('\n')
        .filter((line) => /"msg":"database (unreachable|reachable again)"/.test(line));
      const last = said.at(-1);
      if (!last) return `${proc.name}: no change logged`;
      try {
        const { msg, reason } = JSON.parse(last) as { msg: string; reason?: string };
        return `${proc.name}: ${msg}${reason ? ` (${reason})` : ''}`;
      } catch {
        return `${proc.name}: ${last.slice(0, 200)}`;
      }
    })
    .join('; ');
}

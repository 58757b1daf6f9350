import { Run, runEventLayout, STREAM_NAMES, type RunEvent } from '@threadwork/contracts';
import { jetStreamOf, type JetStreamManager } from '@threadwork/platform';
import { agent, uniqueId } from '@threadwork/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isTerminalStatus, logProblems, readLog, statusTrail, waitFor } from './support/api.js';
import { Cluster, type ChaosUser } from './support/cluster.js';
import { followBySse, type SseResult } from './support/follow.js';

// Faults of a deployment that runs everything twice: three nats-servers in one JetStream cluster
// with every stream kept on all three (the run event log split in four streams, as production
// splits it), two processes each of gateway, threads, runs and repohost, and three runners. While
// runs go on and clients follow them by SSE through both gateways, in order: `kill -9` of the
// leader of the stream holding a live run's log, then of the DOMAIN stream's (each server started
// again once a successor leads), then one process of each service `kill -9`ed and started again,
// ready before the next goes, then the other one of each stopped with SIGTERM and started again,
// as a rolling update does, and a runner holding a run killed. No acknowledged event is lost or
// stored twice, every run ends once, every follower sees each log once and in order, and no client
// gets an answer other than 200, 202 or 503.

const { say, shell } = agent;
const HARNESS = 'codex';
const GATEWAYS = ['gateway-1', 'gateway-2'];
/** Streams the run event log is split into (RUN_EVENT_SHARDS). */
const SHARDS = 4;
const layout = runEventLayout(SHARDS);
/** Runs that last until every fault is over. */
const LONG_RUNS = 4;
/** Events each long run must add after a fault before the next one: the deployment works again. */
const PROGRESS = 6;

/** Set once every fault is over: the long runs' model then ends their turn. */
let finishing = false;

const scripts = new Map<string, agent.AgentScript>([
  [
    // A shell command per model step, paced like a model that thinks, until the faults are over.
    // Keyed on the test's state, not the conversation's: a run resumed by another runner goes on.
    'LONG',
    (req) =>
      finishing
        ? [say('All faults ridden out.')]
        : { actions: [shell(`echo tick ${req.outputsSinceLastUser.length}`)], delayMs: 500 },
  ],
  [
    // A short run started while a fault is on: three commands and done.
    'SHORT',
    (req) =>
      req.outputsSinceLastUser.length < 3
        ? [shell(`echo step ${req.outputsSinceLastUser.length}`)]
        : [say('Short run done.')],
  ],
]);

let cluster: Cluster;
let user: ChaosUser;
let repoId: number;
let jsm: JetStreamManager;

beforeAll(async () => {
  cluster = await Cluster.start({
    natsServers: 3,
    replicas: { gateway: 2, threads: 2, runs: 2, repohost: 2 },
    runners: 3,
    agentScripts: scripts,
    harnesses: [HARNESS],
    // The run event log split in streams as in production (each of them on all three servers).
    env: { RUN_EVENT_SHARDS: String(SHARDS) },
  });
  user = cluster.createUser();
  repoId = await cluster.addRepo(user);
  ({ jsm } = await jetStreamOf(await cluster.connect()));
});
afterAll(async () => {
  await cluster?.stop();
});

/** Every HTTP answer a client got, with the request it answered. */
const answers: { request: string; status: number }[] = [];
const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
let turn = 0;
/** The fault going on, recorded with each SSE connection's ending. */
let fault = 'none';
/** The gateways in turn, as a balancer spreads requests. */
const nextGateway = () => GATEWAYS[turn++ % GATEWAYS.length]!;

/** A client's request through a gateway, its answer recorded; undefined when no answer came. */
async function call(
  method: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; text: string } | undefined> {
  const via = nextGateway();
  let status: number | undefined;
  try {
    const res = await cluster.fetch(path, {
      user,
      via,
      method,
      signal: AbortSignal.timeout(30_000),
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    status = res.status;
    const text = await res.text();
    answers.push({ request: `${method} ${path} via ${via} → ${text.slice(0, 300)}`, status });
    return { status, text };
  } catch (err) {
    // No answer, or one cut short (the gateway is down, or went down mid-answer): a client tries
    // again. A status that came before the cut still counts.
    if (status !== undefined) answers.push({ request: `${method} ${path} via ${via} → cut: ${String(err)}`, status });
    return undefined;
  }
}

interface Followed {
  runId: string;
  threadId: string;
  long: boolean;
  followers: Promise<SseResult & { via: string }>[];
}
const runs: Followed[] = [];

/** Starts a thread (retrying as a client does, with one client_request_id) and follows its run. */
async function startRun(prompt: string, long: boolean, vias: readonly string[]): Promise<Followed> {
  const clientRequestId = uniqueId('req-');
  const body = { repository_id: repoId, prompt, harness: HARNESS, client_request_id: clientRequestId };
  const created = await waitFor(
    `thread "${prompt}" to be created`,
    async () => {
      const answer = await call('POST', '/v1/threads', body);
      if (answer?.status === 200 || answer?.status === 202) {
        return JSON.parse(answer.text) as { id: string; run_id: string };
      }
      await pause(150);
      return undefined;
    },
    60_000,
    0,
  );
  const run: Followed = {
    runId: created.run_id,
    threadId: created.id,
    long,
    followers: vias.map((via) =>
      followBySse(cluster, user, created.run_id, { via, deadlineMs: 240_000, label: () => fault }).then((r) => ({
        ...r,
        via,
      })),
    ),
  };
  runs.push(run);
  return run;
}

/** How many events the run's log holds now (a client's page read; undefined without an answer). */
async function logLength(runId: string): Promise<number | undefined> {
  let length = 0;
  for (let from = 1; ;) {
    const answer = await call('GET', `/v1/runs/${runId}/events?from=${from}&limit=500`);
    if (answer?.status !== 200) return undefined;
    const page = JSON.parse(answer.text) as { events: RunEvent[]; next_sequence: number };
    if (page.events.length === 0) return length;
    length += page.events.length;
    from = page.next_sequence;
  }
}

/** Waits until every long run's log has grown by PROGRESS events from `since`. */
async function progressed(what: string, since: Map<string, number>): Promise<void> {
  for (const run of runs.filter((r) => r.long)) {
    await waitFor(
      `run ${run.runId} to go on after ${what}`,
      async () => ((await logLength(run.runId)) ?? 0) >= (since.get(run.runId) ?? 0) + PROGRESS,
      90_000,
      200,
    );
  }
}
async function lengths(): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  for (const run of runs.filter((r) => r.long)) {
    out.set(run.runId, await waitFor(`the log of ${run.runId}`, () => logLength(run.runId), 30_000, 200));
  }
  return out;
}

/** The stream's leader once all its copies are current (so an election has full followers to pick). */
function settledLeader(stream: string): Promise<string> {
  return waitFor(
    `${stream} to have a leader and two current replicas`,
    async () => {
      const info = await jsm.streams.info(stream);
      const replicas = info.cluster?.replicas ?? [];
      return (
        info.cluster?.leader &&
        replicas.length === 2 &&
        replicas.every((r) => r.current && !r.offline) &&
        info.cluster.leader
      );
    },
    60_000,
    200,
  );
}

/** `kill -9` of the stream's leader; its server is started again once another leads and runs went on. */
async function killStreamLeader(stream: string): Promise<string> {
  const leader = await settledLeader(stream);
  fault = `${stream} leader ${leader} killed`;
  const before = await lengths();
  const short = startRun(`SHORT during the ${stream} leader's death`, false, [nextGateway()]);
  await cluster.natsCluster!.node(leader).server.stop('SIGKILL');
  const successor = await waitFor(
    `a new ${stream} leader`,
    async () => {
      const info = await jsm.streams.info(stream);
      return info.cluster?.leader && info.cluster.leader !== leader && info.cluster.leader;
    },
    60_000,
    200,
  );
  await short;
  await progressed(`the ${stream} leader's death`, before);
  fault = `${leader} restarting`;
  await cluster.natsCluster!.restart(leader);
  await settledLeader(stream);
  fault = 'none';
  return `${stream}: ${leader} → ${successor}`;
}

/**
 * One process of a service stopped and started again (and ready) once runs went on without it:
 * `kill -9`, or SIGTERM as a rolling update does (the process drains: a gateway ends its streams,
 * a runner hands its jobs back).
 */
async function rollService(name: string, how: 'kill' | 'term' = 'kill'): Promise<string> {
  const before = await lengths();
  fault = how === 'kill' ? `${name} killed` : `${name} stopping`;
  const short = startRun(`SHORT during ${name}'s restart`, false, [nextGateway()]);
  if (how === 'kill') await cluster.crashAndRestartService(name);
  else await cluster.restartService(name);
  fault = `${name} restarted`;
  await short;
  await progressed(`${name}'s restart`, before);
  fault = 'none';
  return how === 'kill' ? name : `${name} (SIGTERM)`;
}

/** A run's messages as its run event stream holds them, each with its Nats-Msg-Id. */
async function stored(runId: string): Promise<{ seq: number; id: string }[]> {
  const out: { seq: number; id: string }[] = [];
  for (let from = 1; ;) {
    let seen = 0;
    try {
      const batch = await jsm.direct.getBatch(layout.streamOf(runId), {
        seq: from,
        next_by_subj: layout.subjectOf(runId),
        batch: 256,
      });
      for await (const m of batch) {
        seen++;
        out.push({ seq: m.seq, id: m.header?.get('Nats-Msg-Id') ?? '' });
        from = m.seq + 1;
      }
    } catch (err) {
      if (!(err instanceof Error && 'code' in err && err.code === 404)) throw err;
    }
    if (seen < 256) return out;
  }
}

/**
 * What is wrong with a run's stored messages: a Nats-Msg-Id twice (an event stored twice), or a
 * gap in a runner attempt's keys `<attempt>:<n>` (an event lost behind one that was stored: a
 * runner sends its events in order, so what an attempt got stored is always 1…m).
 */
function storedProblems(messages: { seq: number; id: string }[]): string[] {
  const problems: string[] = [];
  const ids = new Set<string>();
  const attempts = new Map<string, number[]>();
  for (const { id } of messages) {
    if (ids.has(id)) problems.push(`${id} stored twice`);
    ids.add(id);
    const runner = /^[^:]+:(\d+):(\d+)$/.exec(id);
    if (runner) attempts.set(runner[1]!, [...(attempts.get(runner[1]!) ?? []), Number(runner[2])]);
  }
  for (const [attempt, ns] of attempts) {
    const expected = ns.map((_, i) => i + 1);
    if (ns.join() !== expected.join()) problems.push(`attempt ${attempt}: keys ${ns.join(',')}`);
  }
  return problems;
}

describe('a JetStream cluster and two of every service', () => {
  it('rides out stream leaders’ deaths and a rolling restart of every service', async () => {
    const started = Date.now();
    for (let i = 0; i < LONG_RUNS; i++) await startRun(`LONG run ${i}`, true, GATEWAYS);
    await progressed('the start', new Map());

    const faults: string[] = [];
    // The leader of the stream holding the first long run's log.
    faults.push(await killStreamLeader(layout.streamOf(runs[0]!.runId)));
    faults.push(await killStreamLeader(STREAM_NAMES.domain));
    for (const name of ['gateway-1', 'threads-1', 'runs-1', 'repohost-1']) faults.push(await rollService(name));
    // Then the other replica of each, as `helm upgrade` rolls a Deployment: SIGTERM, drain, start.
    for (const name of ['gateway-2', 'threads-2', 'runs-2', 'repohost-2']) faults.push(await rollService(name, 'term'));
    // The runner holding a long run, so its death takes a run over to another.
    const holder = await waitFor(
      'a runner holding a long run',
      () =>
        runs
          .filter((r) => r.long)
          .map((r) => cluster.runnerHolding(r.threadId))
          .find(Boolean),
      30_000,
    );
    faults.push(await rollService(holder.name));

    finishing = true;
    fault = 'finishing';
    const ended: Run[] = [];
    for (const run of runs) {
      ended.push(
        await waitFor(
          `run ${run.runId} to end`,
          async () => {
            const answer = await call('GET', `/v1/runs/${run.runId}`);
            const r = answer?.status === 200 ? Run.parse(JSON.parse(answer.text)) : undefined;
            return r?.terminal ? r : undefined;
          },
          120_000,
          200,
        ),
      );
    }

    let eventsChecked = 0;
    let followers = 0;
    for (const [i, run] of runs.entries()) {
      const log = await readLog(cluster, user, run.runId);
      eventsChecked += log.length;
      expect(logProblems(log), `run ${run.runId}: ${statusTrail(log).join(' ')}`).toEqual([]);
      const messages = await stored(run.runId);
      expect(storedProblems(messages), `run ${run.runId}`).toEqual([]);
      // Every stored message is in the log clients read, and nothing else is.
      expect(log.map((e) => e.sequence)).toEqual(messages.map((m) => m.seq));
      expect(log.filter(isTerminalStatus)).toHaveLength(1);
      const status = ended[i]!;
      // Only a run whose runner died may fail, and then only as lost.
      if (status.status !== 'completed') expect(status.error?.code, JSON.stringify(status)).toBe('runner_lost');

      for (const follower of await Promise.all(run.followers)) {
        followers++;
        const seen = `follower of ${run.runId} via ${follower.via}: ${follower.events.length} of ${log.length} events (last ${follower.events.at(-1)?.sequence} of ${log.at(-1)?.sequence}), endings ${JSON.stringify(follower.endings)}, statuses ${follower.statuses.join(',')}, errors ${follower.connectionErrors.join('; ')}, hangs ${follower.hangs}`;
        expect(follower.finished, seen).toBe(true);
        expect(follower.problems).toEqual([]);
        expect(
          follower.events.map((e) => e.sequence),
          `follower of ${run.runId} via ${follower.via}`,
        ).toEqual(log.map((e) => e.sequence));
        expect(follower.events).toEqual(log);
        const refusals = [...follower.refusals];
        for (const status of follower.statuses) {
          const body = status === 200 ? '(stream)' : refusals.shift();
          answers.push({ request: `GET /v1/runs/${run.runId}/events/stream via ${follower.via} → ${body}`, status });
        }
      }
    }

    const seen = new Map<number, number>();
    for (const { status } of answers) seen.set(status, (seen.get(status) ?? 0) + 1);
    const wrong = answers.filter((a) => ![200, 202, 503].includes(a.status));
    expect(wrong.map((a) => `${a.status} ${a.request}`)).toEqual([]);

    const outcomes = ended.map((r) => r.status).join(',');
    process.stdout.write(
      `cluster failover: ${runs.length} runs (${outcomes}), ${eventsChecked} events checked, ` +
        `${followers} followers, statuses ${[...seen].map(([s, n]) => `${s}×${n}`).join(' ')}; ` +
        `faults ${faults.join('; ')}; ${((Date.now() - started) / 1000).toFixed(0)} s\n`,
    );
  });
});

// Benchmarks 6 and 7, through the public API with the real runner driving the real agent CLIs
// (Codex, Claude Code) against the fake model of each (libs/testing, one script for both): how long
// a trivial turn takes to show its first harness event and to complete, in a new thread (clone + a
// new agent process) and as a follow-up in the same thread (its agent process still up); and what a
// live sandbox costs in memory. Every harness is measured in the same run, so their figures compare.
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { isTerminalRunStatus } from '@threadwork/contracts';
import { agent } from '@threadwork/testing';
import { codexAloneTurns, startCodexAlone, withTimeout } from '../lib/codex-alone.mjs';
import { commandName, descendants, residentMemory, settle } from '../lib/proc.mjs';
import { median } from '../lib/report.mjs';
import { api } from '../lib/stack.mjs';
import { follow, nowMs } from '../lib/sse.mjs';

const TRIVIAL = 'TRIVIAL';
const HOLD = 'HOLD';
const TURN_TIMEOUT_MS = 60_000;
/**
 * Events that come from the harness's turn. The runner's own (`run.status`, `sandbox.ready` once
 * the sandbox is prepared, before any harness starts, gate refusals, controls, interactions) do not
 * count as the first harness event.
 */
const HARNESS_EVENT_TYPES = new Set([
  'message.delta',
  'message.completed',
  'reasoning.delta',
  'command.started',
  'command.output',
  'command.completed',
  'file.changed',
  'plan.updated',
]);

/**
 * The fake model's script, for either harness: a prompt starting with HOLD gets a reply that stays
 * open for `holdMs` (a long turn, to keep sandboxes live), anything else a one-line answer.
 */
export function benchScript(holdMs) {
  return (req) =>
    req.lastUserText.startsWith(HOLD) ? { actions: [agent.say('working on it')], delayMs: holdMs } : [agent.say('ok')];
}

/**
 * Times one turn as a client sees it: from just before `start` sends its request (which returns
 * the admitted run and the time it was sent) to the first harness event, and to the run's
 * terminal status, both as they arrive on the run's event stream.
 */
async function timeTurn(stack, start) {
  const { runId, sentAt } = await start();
  let firstEventAt = null;
  let sandboxReadyAt = null;
  let terminal = null;
  let streamError = null;
  const stream = follow(`${stack.base}/v1/runs/${runId}/events/stream`, stack.headers, ({ event, data }, at) => {
    if (event === 'end') return;
    if (event === 'error') {
      streamError = data;
      return;
    }
    const { chunk } = JSON.parse(data);
    if (HARNESS_EVENT_TYPES.has(chunk.type)) firstEventAt ??= at;
    else if (chunk.type === 'sandbox.ready') sandboxReadyAt ??= at;
    else if (chunk.type === 'run.status' && isTerminalRunStatus(chunk.status)) terminal = { status: chunk.status, at };
  });
  await stream.opened;
  await withTimeout(stream.ended, TURN_TIMEOUT_MS, `run ${runId}`).finally(() => stream.close());
  if (streamError !== null) throw new Error(`event stream of ${runId} failed: ${streamError}`);
  if (terminal?.status !== 'completed' || firstEventAt === null) {
    const run = await api(stack, 'GET', `/v1/runs/${runId}`);
    throw new Error(`run ${runId} ended ${run.status}: ${JSON.stringify(run.error)}`);
  }
  return {
    firstEventMs: firstEventAt - sentAt,
    completedMs: terminal.at - sentAt,
    sandboxReadyMs: sandboxReadyAt === null ? null : sandboxReadyAt - sentAt,
  };
}

/** Sends a follow-up; the thread turns idle a moment after its run ends, so `thread_busy` is retried. */
async function sendMessage(stack, threadId, prompt) {
  const deadline = Date.now() + TURN_TIMEOUT_MS;
  for (;;) {
    const sentAt = nowMs();
    try {
      const accepted = await api(stack, 'POST', `/v1/threads/${threadId}/messages`, { prompt });
      return { runId: accepted.run_id, sentAt };
    } catch (err) {
      if (err.status !== 409 || Date.now() > deadline) throw err;
      await sleep(20);
    }
  }
}

/**
 * Opens a thread. A 500 is retried with the same `client_request_id` (a replay converges on the
 * same thread and run) and counted: it happens when the runner takes the run up at once and the
 * threads service's write of the admitted run is lost to its concurrent write of the sandbox status.
 */
async function createThread(stack, { prompt, harness }, retried) {
  const body = { repository_id: stack.repositoryId, prompt, harness, client_request_id: `bench-${randomUUID()}` };
  for (let attempt = 1; ; attempt++) {
    try {
      return await api(stack, 'POST', '/v1/threads', body);
    } catch (err) {
      if (err.status !== 500 || attempt === 3) throw err;
      retried.count += 1;
    }
  }
}

/**
 * Benchmark 6: `turns` rounds; in each, every one of `harnesses` opens a new thread and sends one
 * follow-up in it. The harnesses take turns within a round, first one then the other, so that
 * whatever else the machine does weighs on each alike. Medians by harness.
 */
export async function turnsBenchmark(stack, { turns, harnesses }) {
  const samples = new Map(harnesses.map((harness) => [harness, { cold: [], warm: [] }]));
  const retried = { count: 0 };
  for (let i = 1; i <= turns; i++) {
    const order = i % 2 ? harnesses : [...harnesses].reverse();
    for (const harness of order) {
      const { cold, warm } = samples.get(harness);
      let threadId;
      cold.push(
        await timeTurn(stack, async () => {
          const sentAt = nowMs();
          const created = await createThread(stack, { prompt: `${TRIVIAL} cold ${i}`, harness }, retried);
          threadId = created.id;
          return { runId: created.run_id, sentAt };
        }),
      );
      warm.push(await timeTurn(stack, () => sendMessage(stack, threadId, `${TRIVIAL} warm ${i}`)));
    }
  }
  const summary = (list) => ({
    firstEventMs: median(list.map((t) => t.firstEventMs)),
    completedMs: median(list.map((t) => t.completedMs)),
    samples: list.length,
  });
  const byHarness = Object.fromEntries(
    [...samples].map(([harness, { cold, warm }]) => [harness, { cold: summary(cold), warm: summary(warm) }]),
  );
  return { byHarness, createRetriedAfter500: retried.count };
}

const summaryOf = (list) => {
  const ready = list.map((t) => t.sandboxReadyMs).filter((ms) => ms !== null && ms !== undefined);
  return {
    firstEventMs: median(list.map((t) => t.firstEventMs)),
    completedMs: median(list.map((t) => t.completedMs)),
    // Ours only: the runner's sandbox.ready, before the harness is started (or given the turn).
    sandboxReadyMs: ready.length ? median(ready) : null,
    samples: list.length,
  };
};

/**
 * Benchmark 9: Codex turns through Threadwork against the same turns of Codex alone (lib/codex-alone.mjs:
 * the same binary in a jail of the runner's shape, the same fake model), `turns` rounds, each
 * side's cold turn then its warm one, the side going first alternating from round to round, each
 * side starting once the machine is quiet again (proc.mjs settle).
 * Ours: POST /v1/threads → first harness event (cold), the follow-up → its first event (warm), as
 * benchmark 6. Alone: spawn → the first turn's first event (cold), a second turn/start on the
 * started process → its first event (warm).
 */
export async function harnessAloneBenchmark(stack, fake, { turns }) {
  const ours = { cold: [], warm: [] };
  const alone = { cold: [], warm: [] };
  const retried = { count: 0 };
  const oursRound = async (i) => {
    let threadId;
    ours.cold.push(
      await timeTurn(stack, async () => {
        const sentAt = nowMs();
        const created = await createThread(stack, { prompt: `${TRIVIAL} cold ${i}`, harness: 'codex' }, retried);
        threadId = created.id;
        return { runId: created.run_id, sentAt };
      }),
    );
    ours.warm.push(await timeTurn(stack, () => sendMessage(stack, threadId, `${TRIVIAL} warm ${i}`)));
  };
  const aloneRound = async (i) => {
    const { cold, warm } = await codexAloneTurns(fake, `${TRIVIAL} alone ${i}`);
    alone.cold.push(cold);
    alone.warm.push(warm);
  };
  // One of each first, not counted: the first start of a binary reads it from disk.
  await aloneRound(0);
  alone.cold.length = 0;
  alone.warm.length = 0;
  for (let i = 1; i <= turns; i++) {
    for (const side of i % 2 ? [oursRound, aloneRound] : [aloneRound, oursRound]) {
      // Each side on a quiet machine: not with the spare sandbox our runner makes after its turn.
      await settle();
      await side(i);
    }
  }
  return {
    ours: { cold: summaryOf(ours.cold), warm: summaryOf(ours.warm) },
    alone: { cold: summaryOf(alone.cold), warm: summaryOf(alone.warm) },
    createRetriedAfter500: retried.count,
  };
}

/** Polls the run until it is terminal; throws unless it completed. */
async function completedRun(stack, runId) {
  const deadline = Date.now() + TURN_TIMEOUT_MS;
  for (;;) {
    const run = await api(stack, 'GET', `/v1/runs/${runId}`);
    if (run.terminal) {
      if (run.status !== 'completed') throw new Error(`run ${runId} ended ${run.status}: ${JSON.stringify(run.error)}`);
      return;
    }
    if (Date.now() > deadline) throw new Error(`run ${runId} did not end within ${TURN_TIMEOUT_MS} ms`);
    await sleep(25);
  }
}

/** `concurrency` loops doing `one(i)` until `total` calls in all have been made; calls per second. */
async function closedLoop(total, concurrency, one) {
  let next = 0;
  const started = nowMs();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < total) await one(next++);
    }),
  );
  const seconds = (nowMs() - started) / 1000;
  return { runs: total, seconds, perSecond: total / seconds };
}

/**
 * Benchmark 10: trivial runs per second end to end, each a new thread (POST /v1/threads, then
 * polling GET /v1/runs/{id} until completed), `concurrency` at a time, with the runners of the
 * stack (two: see all.mjs); against Codex alone doing the same trivial turn in a new jailed
 * process each (spawn, initialize, thread/start, turn/start → turn/completed, stop), the same
 * number at a time. `runs` per side in `rounds` alternating rounds.
 */
export async function throughputBenchmark(stack, fake, { runs, concurrency, rounds }) {
  const retried = { count: 0 };
  const oursOne = async (i) => {
    const created = await createThread(stack, { prompt: `${TRIVIAL} throughput ${i}`, harness: 'codex' }, retried);
    await completedRun(stack, created.run_id);
  };
  const aloneOne = async (i) => {
    const codex = await startCodexAlone({ baseUrl: fake.baseUrl });
    try {
      await codex.turn(`${TRIVIAL} alone throughput ${i}`);
    } finally {
      await codex.stop();
    }
  };
  const perRound = Math.max(concurrency, Math.ceil(runs / rounds));
  const sides = { ours: { runs: 0, seconds: 0 }, alone: { runs: 0, seconds: 0 } };
  for (let r = 0; r < rounds; r++) {
    for (const [name, one] of r % 2
      ? [
          ['alone', aloneOne],
          ['ours', oursOne],
        ]
      : [
          ['ours', oursOne],
          ['alone', aloneOne],
        ]) {
      const result = await closedLoop(perRound, concurrency, one);
      sides[name].runs += result.runs;
      sides[name].seconds += result.seconds;
    }
  }
  const rate = ({ runs: n, seconds }) => ({ runs: n, seconds, perSecond: n / seconds });
  return {
    concurrency,
    runners: [...stack.services.keys()].filter((name) => name.startsWith('runner')).length,
    ours: rate(sides.ours),
    alone: rate(sides.alone),
    createRetriedAfter500: retried.count,
  };
}

/**
 * Benchmark 7, the runner's part, for one harness (`fake` is its model): the runner's memory idle,
 * then with `sandboxes` turns in flight at once (each holding a live agent process tree, the
 * runner's descendants: the jail and the harness), then those turns cancelled.
 */
export async function sandboxMemoryBenchmark(stack, fake, { sandboxes, harness }) {
  const runner = stack.services.get('runner');
  const before = new Set(descendants(runner.pid));
  const runnerIdle = residentMemory(runner.pid);
  // Sandboxes whose turn reached the model, by their distinct prompts: a harness may send more than
  // one request for a turn.
  const seen = fake.requests.length;
  const holdRequests = () =>
    new Set(
      fake.requests
        .slice(seen)
        .map((r) => r.lastUserText)
        .filter((text) => text.startsWith(HOLD)),
    ).size;

  const runIds = [];
  const retried = { count: 0 };
  for (let i = 1; i <= sandboxes; i++) {
    runIds.push((await createThread(stack, { prompt: `${HOLD} sandbox ${i}`, harness }, retried)).run_id);
  }
  // Every turn has reached the model: each sandbox has its agent process up and mid-turn.
  const deadline = Date.now() + TURN_TIMEOUT_MS;
  while (holdRequests() < sandboxes) {
    if (Date.now() > deadline) throw new Error(`only ${holdRequests()} of ${sandboxes} ${harness} sandboxes started`);
    await sleep(100);
  }
  await sleep(1_000);
  const runnerLive = residentMemory(runner.pid);
  const tree = descendants(runner.pid)
    .filter((pid) => !before.has(pid))
    .map((pid) => ({ name: commandName(pid), memory: residentMemory(pid) }))
    .filter((p) => p.name !== null && p.memory !== null);
  // What the tree is made of (the jail's, the harness's), each kind with its memory per sandbox.
  const commands = {};
  for (const { name, memory } of tree) {
    const kind = (commands[name] ??= { count: 0, rss: 0, anon: 0 });
    kind.count += 1;
    kind.rss += memory.rss / sandboxes;
    kind.anon += memory.anon / sandboxes;
  }

  for (const runId of runIds) await api(stack, 'POST', `/v1/runs/${runId}/cancel`);
  for (const runId of runIds) {
    while (!(await api(stack, 'GET', `/v1/runs/${runId}`)).terminal) {
      if (Date.now() > deadline + TURN_TIMEOUT_MS) throw new Error(`run ${runId} did not end after cancel`);
      await sleep(100);
    }
  }

  const sum = (field) => tree.reduce((total, p) => total + p.memory[field], 0);
  return {
    sandboxes,
    processes: tree.length,
    commands,
    runnerIdle,
    runnerLive,
    perSandbox: {
      runnerGrowth: {
        rss: (runnerLive.rss - runnerIdle.rss) / sandboxes,
        anon: (runnerLive.anon - runnerIdle.anon) / sandboxes,
      },
      harness: { rss: sum('rss') / sandboxes, anon: sum('anon') / sandboxes },
    },
  };
}

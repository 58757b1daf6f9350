// Every selected benchmark in turn against one started stack, each next to its baseline.
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { residentMemory } from '../lib/proc.mjs';
import { createHeldRun } from '../lib/runs.mjs';
import { log } from '../lib/stack.mjs';
import { appendBenchmark, appendLikeRunner } from './append.mjs';
import { eventPagesBenchmark, healthBenchmark, runReadBenchmark } from './api.mjs';
import { eventScaleBenchmark } from './event-scale.mjs';
import { followersBenchmark } from './followers.mjs';
import { harnessAloneBenchmark, sandboxMemoryBenchmark, throughputBenchmark, turnsBenchmark } from './runner.mjs';

/** Memory of every process of the stack now, by name. */
function memoryNow(stack) {
  return new Map([...stack.processIds()].map(([name, pid]) => [name, residentMemory(pid)]));
}

/**
 * Runs the `selected` benchmarks with `opts`; the results, by benchmark, for the report. `fakes` is
 * the fake model of each harness the runner serves, by harness name.
 */
export async function runBenchmarks(stack, fakes, { opts, selected }) {
  const harnesses = [...fakes.keys()];
  const load = { connections: opts.connections, seconds: opts.seconds, rounds: opts.rounds };
  const results = { options: opts, selected: [...selected] };
  const step = async (name, what, run) => {
    if (!selected.has(name)) return;
    log(what);
    results[name] = await run();
    stack.assertRunning();
  };

  // Idle: started, streams and consumers set up, nothing asked of it yet.
  await sleep(2_000);
  results.memoryIdle = Object.fromEntries(memoryNow(stack));

  let seeded;
  if (selected.has('run-read') || selected.has('event-pages')) {
    log(`appending ${opts.events} events to one run, as the runner does…`);
    seeded = await createHeldRun(stack, 'a long run');
    const seedMs = await appendLikeRunner(stack, seeded, opts.events);
    results.seed = { events: opts.events, perSecond: (opts.events * 1000) / seedMs };
  }

  await step('run-read', 'benchmark 1: GET /v1/runs/{id} against a bare findOne', () =>
    runReadBenchmark(stack, { runId: seeded.runId, ...load }),
  );
  await step('healthz', 'benchmark 2: GET /healthz against a bare fastify', () => healthBenchmark(stack, load));
  await step('event-pages', `benchmark 3: event pages of a ${opts.events}-event run, tail against head`, () =>
    eventPagesBenchmark(stack, { runId: seeded.runId, ...load }),
  );
  await step('append', `benchmark 4: ${opts['append-events']} events through the runner's path and raw`, () =>
    appendBenchmark(stack, { events: opts['append-events'], rounds: opts.rounds }),
  );
  const gatewayBases = [stack.base];
  await step(
    'followers',
    `benchmark 5: ${opts.followers} SSE followers over ${opts.gateways} gateways at ${opts['sse-rate']} events/s`,
    async () => {
      while (gatewayBases.length < opts.gateways) gatewayBases.push(await stack.addGateway());
      return followersBenchmark(stack, {
        followers: opts.followers,
        eventsPerSecond: opts['sse-rate'],
        seconds: opts['sse-seconds'],
        rounds: opts.rounds,
        gatewayBases,
      });
    },
  );
  await step(
    'sandboxes',
    `benchmark 7: runner memory with ${opts.sandboxes} live sandboxes of each harness`,
    async () => {
      const byHarness = {};
      for (const [harness, fake] of fakes) {
        byHarness[harness] = await sandboxMemoryBenchmark(stack, fake, { sandboxes: opts.sandboxes, harness });
      }
      return byHarness;
    },
  );
  await step('turns', `benchmark 6: ${opts.turns} trivial turns of each harness, cold and warm`, () =>
    turnsBenchmark(stack, { turns: opts.turns, harnesses }),
  );
  const codex = fakes.get('codex');
  await step(
    'harness-alone',
    `benchmark 9: ${opts.turns} Codex turns, cold and warm, through Threadwork and alone`,
    () => harnessAloneBenchmark(stack, codex, { turns: opts.turns }),
  );
  await step('jail', `benchmark 8: ${opts.turns} trivial turns, cold and warm, jailed and not`, async () => {
    // The same turns through a runner that jails each sandbox, then through one that does not. The
    // jailed one keeps its sandboxes outside the temporary directory, as deployed: there Codex's own
    // sandbox confines commands, which SANDBOX_JAIL=required needs where the kernel has no Yama. It
    // serves Codex only: Claude Code has no sandbox of its own, so without Yama a runner refuses to
    // jail it as required.
    mkdirSync('/var/tmp', { recursive: true });
    const sandboxes = mkdtempSync('/var/tmp/threadwork-bench-sandboxes-');
    try {
      await stack.restartRunner({ SANDBOX_JAIL: 'required', SANDBOX_ROOT: sandboxes, HARNESSES: 'codex' });
      const codexTurns = async () =>
        (await turnsBenchmark(stack, { turns: opts.turns, harnesses: ['codex'] })).byHarness.codex;
      const jailed = await codexTurns();
      await stack.restartRunner({ SANDBOX_JAIL: 'off', HARNESSES: 'codex' });
      const bare = await codexTurns();
      return { jailed, bare };
    } finally {
      // Back to its own settings for what follows.
      await stack.restartRunner();
      rmSync(sandboxes, { recursive: true, force: true });
    }
  });
  await step(
    'event-scale',
    `benchmark 11: one run's page among ${opts['scale-runs']} runs, 1 stream vs ${opts['scale-shards']} and the archive`,
    () =>
      eventScaleBenchmark(stack, {
        runs: opts['scale-runs'],
        events: opts['scale-events'],
        live: opts['scale-live'],
        shards: opts['scale-shards'],
        reads: opts['scale-reads'],
        rounds: opts.rounds,
        archived: opts['scale-archived'],
      }),
  );
  // Last: it adds a runner, which stays.
  await step(
    'throughput',
    `benchmark 10: ${opts['throughput-runs']} trivial runs, ${opts.concurrency} at a time, ${opts.runners} runners against Codex alone`,
    async () => {
      const runners = () => [...stack.services.values()].filter((p) => p.role === 'runner').length;
      while (runners() < opts.runners) await stack.addRunner();
      return throughputBenchmark(stack, codex, {
        runs: opts['throughput-runs'],
        concurrency: opts.concurrency,
        rounds: opts.rounds,
      });
    },
  );
  return results;
}

#!/usr/bin/env node
// The benchmark suite: starts a whole local stack (see lib/stack.mjs), measures each path next to
// a baseline in the same run, and prints Markdown tables (progress goes to stderr). Needs a build;
// `npm run bench` builds first. Loopback only, bounded in time (about 4 minutes; --quick about 3).
//
//   node bench/run.mjs [--quick] [--only a,b] [--seconds 10] [--rounds 5] [--connections 10] [--events 100000]
//                      [--append-events 20000] [--followers 1000] [--sse-rate 20] [--sse-seconds 10]
//                      [--turns 20] [--sandboxes 4] [--scale-runs 300000] [--scale-events 10] [--scale-live 1000]
//                      [--scale-shards 16] [--scale-reads 1000] [--scale-archived 5000] [--profile gateway,runs] [--json out.json]
//
// Benchmarks (--only): run-read healthz event-pages append followers sandboxes turns jail event-scale.
import { writeFileSync } from 'node:fs';
import { cpus, loadavg, totalmem } from 'node:os';
// autocannon (and the CommonJS packages below it) is loaded first, before anything makes a logger.
// Loaded after one (seen on Node 20.20.2; the cause is not pinned down), those packages resolve
// their dependencies from pnpm's hoisted copies (an ESM strip-ansi under a CommonJS string-width)
// and fail.
import './lib/load.mjs';
import { agent } from '@threadwork/testing';
import { parseOptions } from './lib/options.mjs';
import { startStack } from './lib/stack.mjs';
import { report } from './lib/summary.mjs';
import { runBenchmarks } from './suites/all.mjs';
import { benchScript } from './suites/runner.mjs';

const { args, opts, selected, profile, profileDir } = parseOptions();
const out = (line = '') => process.stdout.write(`${line}\n`);

const loadAverage = () =>
  loadavg()
    .map((n) => n.toFixed(2))
    .join(' ');
const header = `Threadwork benchmarks — ${new Date().toISOString()} — ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}, ${Math.round(totalmem() / 2 ** 30)} GiB, Node ${process.version}${args.quick ? ' — quick' : ''}`;
const loadAtStart = loadAverage();

// One fake model per harness, each playing the same script in its harness's API.
const fakes = new Map();
let stack;
const shutdown = async () => {
  await stack?.stop();
  await Promise.all([...fakes.values()].map((fake) => fake.close()));
};
process.once('SIGINT', () => void shutdown().then(() => process.exit(130)));
process.once('SIGTERM', () => void shutdown().then(() => process.exit(143)));
try {
  for (const harness of agent.HARNESS_NAMES)
    fakes.set(harness, await agent.startAgentFake(harness, benchScript(120_000)));
  stack = await startStack({
    runnerEnv: {
      ...Object.assign({}, ...[...fakes.values()].map((fake) => fake.runnerEnv('bench-model-key'))),
      HARNESSES: [...fakes.keys()].join(','),
      RUNNER_CONCURRENCY: String(Math.max(2, opts.sandboxes)),
    },
    harnesses: [...fakes.keys()],
    profile,
    profileDir,
  });
  const results = await runBenchmarks(stack, fakes, { opts, selected });
  out(header);
  out(`Load average (1, 5, 15 min) at start: ${loadAtStart}; at end: ${loadAverage()}.`);
  out();
  report(results, { opts, profile, profileDir });
  if (args.json) {
    const replacer = (_key, value) => (value instanceof Map ? Object.fromEntries(value) : value);
    writeFileSync(args.json, JSON.stringify(results, replacer, 2) + '\n');
  }
} finally {
  await shutdown();
}

// HTTP load with autocannon: closed loop, a fixed number of connections, one request in flight on
// each. Ours and the baseline are loaded in alternating rounds (A B A B …), so that whatever else
// the machine does meanwhile weighs on both sides alike; a short warm-up of each (JIT, connection
// pools, caches) comes first and is not counted. A target is either an HTTP request (`url`,
// `headers`) or an operation of this process (`op`, an async function), run the same way: as many
// loops as connections, each awaiting one call before the next.
import { performance } from 'node:perf_hooks';
import autocannon from 'autocannon';
import { cpuMeter } from './proc.mjs';
import { median } from './report.mjs';

const WARMUP_SECONDS = 2;

/**
 * `connections` closed loops calling `op` for `seconds`, in autocannon's result shape (latencies in
 * whole milliseconds, as its histogram has them). A failed call fails the round.
 */
async function loadOp(op, { connections, seconds }) {
  const latencies = [];
  const started = performance.now();
  const until = started + seconds * 1000;
  await Promise.all(
    Array.from({ length: connections }, async () => {
      while (performance.now() < until) {
        const t = performance.now();
        await op();
        latencies.push(performance.now() - t);
      }
    }),
  );
  latencies.sort((a, b) => a - b);
  const at = (p) => Math.round(latencies[Math.min(latencies.length - 1, Math.ceil(p * latencies.length) - 1)] ?? 0);
  return {
    errors: 0,
    timeouts: 0,
    non2xx: 0,
    requests: { total: latencies.length },
    duration: (performance.now() - started) / 1000,
    latency: { p50: at(0.5), p99: at(0.99) },
  };
}

const loadOnce = ({ url, headers = {}, op }, { connections, seconds }) =>
  op ? loadOp(op, { connections, seconds }) : autocannon({ url, headers, connections, duration: seconds });

/** One round of load on `target`; throws when any request failed: the figures would not be the path's. */
async function round(target, { connections, seconds, pids }) {
  const { url = 'op' } = target;
  const cpu = cpuMeter(new Map([...pids, ['load generator', process.pid]]));
  const result = await loadOnce(target, { connections, seconds });
  const spent = cpu();
  const failed = result.errors + result.timeouts + result.non2xx;
  if (failed > 0) {
    const statuses = JSON.stringify(result.statusCodeStats);
    throw new Error(`${url}: ${failed} of ${result.requests.total} requests failed (status ${statuses})`);
  }
  return {
    requests: result.requests.total,
    seconds: result.duration,
    p50: result.latency.p50,
    p99: result.latency.p99,
    spent,
  };
}

/** Sums the rounds of one side into its figures. */
function summarize(rounds, connections) {
  const requests = rounds.reduce((sum, r) => sum + r.requests, 0);
  const seconds = rounds.reduce((sum, r) => sum + r.seconds, 0);
  const rps = requests / seconds;
  const cpuMsPerRequest = new Map();
  for (const name of rounds[0].spent.keys()) {
    const values = rounds.map((r) => r.spent.get(name));
    const total = values.includes(null) ? null : values.reduce((sum, v) => sum + v, 0);
    cpuMsPerRequest.set(name, total === null ? null : (total * 1000) / requests);
  }
  return {
    rps,
    // Little's law: keeps sub-millisecond precision, which autocannon's whole-millisecond histogram lacks.
    meanMs: (connections * 1000) / rps,
    // Medians over the rounds of each round's percentile.
    p50: median(rounds.map((r) => r.p50)),
    p99: median(rounds.map((r) => r.p99)),
    requests,
    cpuMsPerRequest,
  };
}

/**
 * Loads each target (`{ url, headers }` or `{ op }`) for `seconds` in all, split into `rounds` alternating
 * rounds. Returns, per target: requests per second, mean latency, p50 and p99 (ms), and the CPU
 * milliseconds each process of `pids` (name → pid) and the load generator spent per request.
 */
export async function compareLoad(targets, { connections, seconds, rounds, pids = new Map() }) {
  for (const target of targets) await loadOnce(target, { connections, seconds: WARMUP_SECONDS });
  const results = targets.map(() => []);
  for (let i = 0; i < rounds; i++) {
    for (const [t, target] of targets.entries()) {
      results[t].push(await round(target, { connections, seconds: seconds / rounds, pids }));
    }
  }
  return results.map((r) => summarize(r, connections));
}

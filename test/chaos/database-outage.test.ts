import { describe, expect, it } from 'vitest';
import { waitFor } from './support/api.js';
import type { ServiceProcess } from './support/cluster.js';
import { cluster, problemOf, report, useOutageCluster } from './support/outage.js';
import { callThroughOutage, prepareRound } from './support/outage-clients.js';
import { checkLiveRun, checkWrites } from './support/outage-checks.js';

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

useOutageCluster();

const UNREACHABLE = 'database unreachable';
const REACHABLE = 'database reachable again';
/** How often a service logged `msg` so far. */
const said = (proc: ServiceProcess, msg: string) => proc.output().split(`"msg":"${msg}"`).length - 1;

/**
 * ROUNDS outages of one kind: `killed` (`kill -9`, then started again on the same store: connections
 * are refused) or `frozen` (`SIGSTOP`, then `SIGCONT`: connections hang, as in a network partition).
 */
async function outages(fault: 'killed' | 'frozen'): Promise<void> {
  const pids = new Map([...cluster.services.values()].map((proc) => [proc.name, proc.pid]));
  let worstMs = 0;
  let answered = 0;
  const before = new Map(
    [...cluster.services.values()].map((proc) => [
      proc.name,
      [said(proc, UNREACHABLE), said(proc, REACHABLE)] as const,
    ]),
  );

  for (let round = 0; round < ROUNDS; round++) {
    const setup = await prepareRound(round);
    const { outcomes, writes, appendKeys } = await callThroughOutage(fault, round, setup);
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

    // Each service said when it lost the database and when it had it back: every loss it logged
    // has its return logged by now. A service notices an outage when a call of its own fails (or
    // its monitor's heartbeat, every 10 s), so one called little may miss a short one; the threads
    // and runs services, whose every create and read here goes to the database, notice every kill.
    for (const proc of cluster.services.values()) {
      const [lostBefore, backBefore] = before.get(proc.name) ?? [0, 0];
      const lost = () => said(proc, UNREACHABLE) - lostBefore;
      // The return is seen by the next call or heartbeat (every 10 s), not at once for an idle service.
      await waitFor(`${proc.name} to log each return`, () => said(proc, REACHABLE) - backBefore === lost(), 30_000);
      if (fault === 'killed' && ['threads', 'runs'].includes(proc.role)) {
        expect(lost(), `${proc.name} logged each outage`).toBeGreaterThanOrEqual(round + 1);
      }
    }

    await checkWrites(setup, writes);
    await checkLiveRun(setup, appendKeys);
  }

  report(`database ${fault}: ${answered} answers in ${ROUNDS} outages; the slowest took ${Math.round(worstMs)} ms`);
}

describe('the database down for a few seconds', () => {
  it('killed: 503 unavailable (never 500, never a hang), recovers without a restart, nothing half-written', () =>
    outages('killed'));

  it('frozen: the same when connections hang instead of being refused', () => outages('frozen'));
});

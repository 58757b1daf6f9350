import { jetstream } from '@nats-io/jetstream';
import { rpc, runEventLayout } from '@threadwork/contracts';
import { createLogger, loadConfig, request } from '@threadwork/platform';
import { baseServiceEnv } from '@threadwork/testing';
import { describe, expect, it } from 'vitest';
import { RunsConfig } from '../src/index.js';
import type { RunsContext } from '../src/flows/context.js';
import { createInteraction } from '../src/flows/interactions.js';
import { moveRun } from '../src/flows/lifecycle.js';
import { appendEvents } from '../src/flows/runner-moves.js';
import { createEventLog } from '../src/store/event-log.js';
import { getRun, readLog, runningRun, statusLog } from './helpers.js';
import { lifecycleHarness } from './lifecycle-harness.js';

describe('run lifecycle', () => {
  const h = lifecycleHarness();

  it('never logs a move behind the terminal event of a decision that overtook it', async () => {
    // A user's cancel moves the run to `cancelling`; between its look for a terminal decision and
    // its append, the runner's completion is decided and logged. The terminal event stays last.
    const { run, attempt, claim_id } = await runningRun(h.nc);
    const ctx = contextDecidingAt(1, () =>
      request(h.nc, rpc.runs.transition, { run_id: run.id, attempt, claim_id, to: 'completed' }),
    );
    const doc = await h.store.runs.findOne({ _id: run.id });
    await moveRun(ctx, doc!, 'cancelling', { cause: 'cancel' });
    expect(ctx.decided()).toBe(true);
    expect(await statusLog(h, run.id)).toEqual(['queued', 'starting', 'running', 'completed']);
    expect(await getRun(h, run.id)).toMatchObject({
      status: 'completed',
      terminal: true,
    });
  });

  /** A context whose event log lets `decide` run just before its `nth` append. */
  function contextDecidingAt(nth: number, decide: () => Promise<unknown>): RunsContext & { decided: () => boolean } {
    const log = createEventLog({ nc: h.nc, js: jetstream(h.nc), jsm: h.jsm, layout: runEventLayout(1) });
    let calls = 0;
    let decided = false;
    const step = async () => {
      if (++calls !== nth) return;
      await decide();
      decided = true;
    };
    return {
      store: h.store,
      interactions: h.interactions,
      archive: h.archive,
      nc: h.nc,
      js: jetstream(h.nc),
      config: loadConfig(RunsConfig, baseServiceEnv(h.nats.env('runs'))),
      logger: createLogger({ service: 'runs-test', level: 'silent' }),
      log: {
        ...log,
        async append(runId, entries, at) {
          await step();
          return log.append(runId, entries, at);
        },
        async appendAfter(runId, last, entry, at) {
          await step();
          return log.appendAfter(runId, last, entry, at);
        },
      },
      decided: () => decided,
    };
  }

  const runnerEvents = (n: number) =>
    Array.from({ length: n }, (_, i) => ({
      key: `late-${i}`,
      chunk: { type: 'message.delta', item_id: 'm', delta: `${i}` },
    }));

  it.each([1, 3])(
    "never stores a runner's event behind a terminal decision that overtook its append (decided before event %i)",
    async (nth) => {
      // The runner's batch passed the check for an ended run; then, before event `nth` went in,
      // the user's cancel ended the run. The terminal event stays last; the rest is refused.
      const { run, attempt, owner, claim_id } = await runningRun(h.nc);
      const ctx = contextDecidingAt(nth, () =>
        request(h.nc, rpc.runs.cancel, { owner_id: owner, run_id: run.id }).then(() =>
          request(h.nc, rpc.runs.transition, { run_id: run.id, attempt, claim_id, to: 'cancelled' }),
        ),
      );
      const appended = appendEvents(ctx, { run_id: run.id, attempt, claim_id, events: runnerEvents(4) });
      await expect(appended).rejects.toMatchObject({ code: 'already_settled' });
      expect(ctx.decided()).toBe(true);
      const types = (await readLog(h, run.id)).map((e) => e.chunk as { type: string; status?: string });
      expect(types.at(-1)).toEqual(expect.objectContaining({ type: 'run.status', status: 'cancelled' }));
      // What went in before the decision stays, in order; nothing came after it.
      expect(types.filter((c) => c.type === 'message.delta')).toHaveLength(nth - 1);
    },
  );

  it('announces a question only while the run is live: never behind the terminal event', async () => {
    const { run, attempt, owner, claim_id } = await runningRun(h.nc);
    // The first append is the move to waiting_for_input; the decision comes before the second.
    const ctx = contextDecidingAt(2, () =>
      request(h.nc, rpc.runs.cancel, { owner_id: owner, run_id: run.id }).then(() =>
        request(h.nc, rpc.runs.transition, { run_id: run.id, attempt, claim_id, to: 'cancelled' }),
      ),
    );
    const created = createInteraction(ctx, {
      run_id: run.id,
      attempt,
      claim_id,
      key: 'late-question',
      kind: 'question',
      questions: [{ id: 'q', header: 'Q', question: 'Now?', isOther: false, isSecret: false, options: [] }],
    });
    await expect(created).rejects.toMatchObject({ code: 'already_settled' });
    const chunks = (await readLog(h, run.id)).map((e) => e.chunk as { type: string; status?: string });
    expect(chunks.at(-1)).toEqual(expect.objectContaining({ type: 'run.status', status: 'cancelled' }));
    // The run's end settled the question it had raised: asked once, cancelled, before the end.
    expect(chunks.slice(-3)).toEqual([
      expect.objectContaining({ type: 'interaction.requested' }),
      expect.objectContaining({ type: 'interaction.settled', status: 'cancelled' }),
      expect.objectContaining({ type: 'run.status', status: 'cancelled' }),
    ]);
    expect(chunks.filter((c) => c.type === 'interaction.requested')).toHaveLength(1);
  });
});

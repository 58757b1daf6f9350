import { Run, RunEventPage, ThreadWithRun, type RunEvent } from '@threadwork/contracts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startStack, type Stack, type TestUser } from './support/stack.js';
import { RunDriver, question } from '@threadwork/testing';

// The "exactly one wins" decisions, raced on FerretDB (which does not make conditional updates
// atomic) through the public API.

let stack: Stack;
let user: TestUser;
let repoId: number;

beforeAll(async () => {
  // One user races here, round after round, leaving runs live: the per-user limits would refuse
  // them long before the rounds end (test/security/limits.test.ts plays those).
  stack = await startStack({ MAX_LIVE_RUNS_PER_USER: '0', THREADS_PER_MINUTE_PER_USER: '0' });
  user = await stack.createUser('racer');
  repoId = await stack.addRepo('race-track');
});
afterAll(async () => {
  await stack?.stop();
});

const post = (path: string, body?: unknown) =>
  stack.fetch(path, {
    method: 'POST',
    user,
    ...(body === undefined ? { headers: { 'content-type': 'text/plain' } } : { body: JSON.stringify(body) }),
  });

async function postRetryingUnavailable(path: string, body: unknown): Promise<Response> {
  for (;;) {
    const res = await post(path, body);
    if (res.status !== 503) return res;
    await res.body?.cancel();
    await new Promise((resolve) => setTimeout(resolve, Number(res.headers.get('retry-after') ?? 1) * 1000));
  }
}

async function allEvents(runId: string): Promise<RunEvent[]> {
  const res = await stack.fetch(`/v1/runs/${runId}/events?limit=1000`, { user });
  return RunEventPage.parse(await res.json()).events;
}

const terminalStatusEvents = (events: RunEvent[]) =>
  events.filter((e) => {
    const chunk = e.chunk as { type: string; status?: string };
    return chunk.type === 'run.status' && ['completed', 'failed', 'cancelled'].includes(chunk.status ?? '');
  });

describe('races', () => {
  it('20 concurrent identical creates make one thread and one run', async () => {
    const body = { repository_id: repoId, prompt: 'Only once', client_request_id: `req-${Date.now()}` };
    // Each client retries an `unavailable` answer (a busy machine) as the contract tells it to:
    // with the same client_request_id, which is what makes retrying safe.
    const responses = await Promise.all(Array.from({ length: 20 }, () => postRetryingUnavailable('/v1/threads', body)));
    const bodies = await Promise.all(responses.map(async (r) => ({ status: r.status, body: await r.json() })));
    for (const b of bodies) expect(b.status, JSON.stringify(b.body)).toBe(202);
    const threads = bodies.map((b) => ThreadWithRun.parse(b.body));
    expect(new Set(threads.map((t) => t.id)).size).toBe(1);
    expect(new Set(threads.map((t) => t.run_id)).size).toBe(1);
    expect(new Set(threads.map((t) => t.message_id)).size).toBe(1);

    const tasks = (await (await stack.fetch('/v1/tasks', { user })).json()) as { tasks: { id: string }[] };
    expect(tasks.tasks.filter((t) => t.id === threads[0]!.id)).toHaveLength(1);

    const other = await post('/v1/threads', { ...body, prompt: 'Something else' });
    expect(other.status).toBe(409);
    expect(await other.json()).toMatchObject({ error: { code: 'idempotency_conflict' } });
  });

  it('10 concurrent answers: one 200, nine 409', async () => {
    const created = ThreadWithRun.parse(
      await (await post('/v1/threads', { repository_id: repoId, prompt: 'Ask me' })).json(),
    );
    const driver = await RunDriver.claim(stack.nc, created.run_id);
    await driver.start();
    const interaction = await driver.ask([question('color', ['red', 'green', 'blue'])]);
    const answers = ['red', 'green', 'blue', 'red', 'green', 'blue', 'red', 'green', 'blue', 'red'];
    const responses = await Promise.all(
      answers.map((a) =>
        post(`/v1/interactions/${interaction.id}/answer`, {
          action: 'answer',
          answers: { color: { kind: 'options', optionIds: [a] } },
        }),
      ),
    );
    const statuses = responses.map((r) => r.status).sort();
    expect(statuses).toEqual([200, 409, 409, 409, 409, 409, 409, 409, 409, 409]);
    const events = await allEvents(created.run_id);
    expect(events.filter((e) => (e.chunk as { type: string }).type === 'interaction.settled')).toHaveLength(1);
  });

  it("send-message racing a run's end never makes two live runs", async () => {
    for (let round = 0; round < Number(process.env.RACE_ROUNDS ?? 8); round++) {
      const created = ThreadWithRun.parse(
        await (await post('/v1/threads', { repository_id: repoId, prompt: `round ${round}` })).json(),
      );
      const driver = await RunDriver.claim(stack.nc, created.run_id);
      await driver.start();
      const [, ...sends] = await Promise.all([
        driver.to('completed'),
        post(`/v1/threads/${created.id}/messages`, { prompt: 'a' }),
        post(`/v1/threads/${created.id}/messages`, { prompt: 'b' }),
        post(`/v1/threads/${created.id}/queue`, { prompt: 'c' }),
      ]);
      const accepted = sends.slice(0, 2).filter((r) => r.status === 202);
      for (const r of sends.slice(0, 2)) expect([202, 409]).toContain(r.status);
      expect(
        accepted.length,
        JSON.stringify(await Promise.all(sends.map(async (r) => [r.status, await r.clone().text()]))),
      ).toBeLessThanOrEqual(1);

      // Whatever won, at most one run of the thread is live now and later.
      const runIds = new Set<string>([created.run_id]);
      for (const r of accepted) runIds.add(((await r.json()) as { run_id: string }).run_id);
      const queue = (await sends[2]!.json()) as { control: { created_run_id: string | null } };
      if (queue.control.created_run_id) runIds.add(queue.control.created_run_id);
      const runs = await Promise.all(
        [...runIds].map(async (id) => Run.parse(await (await stack.fetch(`/v1/runs/${id}`, { user })).json())),
      );
      expect(runs.filter((r) => !r.terminal).length).toBeLessThanOrEqual(1);
    }
  });

  it('cancel racing completion ends in exactly one terminal state and one terminal event', async () => {
    for (let round = 0; round < 10; round++) {
      const created = ThreadWithRun.parse(
        await (await post('/v1/threads', { repository_id: repoId, prompt: `cancel ${round}` })).json(),
      );
      const driver = await RunDriver.claim(stack.nc, created.run_id);
      await driver.start();
      const outcomes = await Promise.allSettled([driver.to('completed'), post(`/v1/runs/${created.run_id}/cancel`)]);
      // The cancel may have moved the run to cancelling first; the runner then confirms.
      const run = Run.parse(await (await stack.fetch(`/v1/runs/${created.run_id}`, { user })).json());
      if (run.status === 'cancelling') await driver.to('cancelled');
      const final = Run.parse(await (await stack.fetch(`/v1/runs/${created.run_id}`, { user })).json());
      expect(['completed', 'cancelled'], JSON.stringify(outcomes.map((o) => o.status))).toContain(final.status);
      expect(terminalStatusEvents(await allEvents(created.run_id))).toHaveLength(1);
    }
  });
});

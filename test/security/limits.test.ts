import { ControlList, ErrorBody, MessagePage, Run, TaskList, ThreadWithRun, WorkList } from '@threadwork/contracts';
import { connectMongo, serviceDbName, type MongoClient } from '@threadwork/platform';
import { waitFor } from '@threadwork/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startStack, type Stack, type TestUser } from '../support/stack.js';

// A paying user, or whoever stole their key, must not be able to exhaust the deployment: played
// here through the public HTTP API of a whole stack (no runner: admitted runs stay queued, live).
// At most MAX_LIVE_RUNS_PER_USER runs live and THREADS_PER_MINUTE_PER_USER creations a minute per
// user, refused with nothing written; lists come in pages that always fit one NATS message.

const MAX_LIVE = 3;
const PER_MINUTE = 6;

let stack: Stack;
let mongo: MongoClient;
let repoId: number;

beforeAll(async () => {
  stack = await startStack({
    MAX_LIVE_RUNS_PER_USER: String(MAX_LIVE),
    THREADS_PER_MINUTE_PER_USER: String(PER_MINUTE),
  });
  mongo = await connectMongo({ url: stack.env.MONGO_URL!, appName: 'limits-test' });
  repoId = await stack.addRepo('quota');
});
afterAll(async () => {
  await mongo?.close();
  await stack?.stop();
});

async function json<T>(res: Response, status: number, schema?: { parse(v: unknown): T }): Promise<T> {
  const text = await res.text();
  expect(res.status, text).toBe(status);
  const body = text ? JSON.parse(text) : undefined;
  return schema ? schema.parse(body) : (body as T);
}

const post = (path: string, user: TestUser, body?: unknown) =>
  stack.fetch(path, { method: 'POST', user, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });

const create = (user: TestUser, path = '/v1/threads', body: Record<string, unknown> = {}) =>
  post(path, user, { repository_id: repoId, prompt: 'Burn the budget', ...body });

async function created(user: TestUser, body: Record<string, unknown> = {}) {
  return json(await create(user, '/v1/threads', body), 202, ThreadWithRun);
}

const cancel = async (user: TestUser, runId: string) => json(await post(`/v1/runs/${runId}/cancel`, user), 202, Run);

/** Every row the threads service keeps for the user: a refused request must add none. */
async function footprint(user: TestUser) {
  const db = mongo.db(serviceDbName(stack.env.MONGO_DB_PREFIX!, 'threads'));
  const threads = await db.collection('threads').find({ owner_id: user.id }).toArray();
  const threadIds = threads.map((t) => t._id as unknown as string);
  return {
    projects: await db.collection('projects').countDocuments({ owner_id: user.id }),
    threads: threads.length,
    messages: await db.collection('messages').countDocuments({ thread_id: { $in: threadIds } }),
    controls: await db.collection('controls').countDocuments({ owner_id: user.id }),
    requests: await db.collection('requests').countDocuments({ owner_id: user.id }),
  };
}

async function expectError(res: Response, status: number, code: string) {
  const body = await json(res, status, ErrorBody);
  expect(body.error.code).toBe(code);
  return res;
}

describe('live runs per user', () => {
  it('a burst of creates past the limit admits exactly the limit and writes nothing for the rest', async () => {
    const eve = await stack.createUser();
    const burst = await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        create(eve, i % 2 ? '/v1/tasks' : '/v1/threads', i % 3 ? {} : { client_request_id: `burst-${i}` }),
      ),
    );
    const statuses = burst.map((res) => res.status).sort();
    expect(statuses).toEqual([...Array(MAX_LIVE).fill(202), ...Array(10 - MAX_LIVE).fill(409)]);
    for (const res of burst.filter((r) => r.status === 409)) await expectError(res, 409, 'too_many_runs');
    const tasks = await json(await stack.fetch('/v1/tasks', { user: eve }), 200, TaskList);
    expect(tasks.tasks).toHaveLength(MAX_LIVE);
    expect(await footprint(eve)).toMatchObject({ threads: MAX_LIVE, messages: MAX_LIVE });
  });

  it('refuses creates, sends and queues that would admit one more; the legitimate paths go on below it', async () => {
    const mallory = await stack.createUser();
    const [t1, t2, t3] = [await created(mallory), await created(mallory), await created(mallory)];
    const before = await footprint(mallory);

    await expectError(await create(mallory), 409, 'too_many_runs');
    await expectError(await create(mallory, '/v1/tasks', { client_request_id: 'again' }), 409, 'too_many_runs');
    expect(await footprint(mallory)).toEqual(before);

    // An idle thread while at the limit: sending or queueing would admit a run now.
    await cancel(mallory, t1!.run_id);
    const t4 = await created(mallory);
    const atLimit = await footprint(mallory);
    await expectError(
      await post(`/v1/threads/${t1!.id}/messages`, mallory, { prompt: 'one more' }),
      409,
      'too_many_runs',
    );
    await expectError(
      await post(`/v1/threads/${t1!.id}/queue`, mallory, {
        prompt: 'one more',
        client_request_id: 'q1',
        message_id: 'm1',
      }),
      409,
      'too_many_runs',
    );
    // A busy thread says so, whatever the count.
    await expectError(await post(`/v1/threads/${t2!.id}/messages`, mallory, { prompt: 'now' }), 409, 'thread_busy');
    expect(await footprint(mallory)).toEqual(atLimit);
    const page = await json(await stack.fetch(`/v1/threads/${t1!.id}/messages`, { user: mallory }), 200, MessagePage);
    expect(page.messages).toHaveLength(1);

    // Queued behind an active run it is accepted: it admits nothing now.
    const queued = await json(
      await post(`/v1/threads/${t2!.id}/queue`, mallory, {
        prompt: 'after you',
        client_request_id: 'q2',
        message_id: 'm2',
      }),
      202,
    );
    expect(queued).toMatchObject({ control: { status: 'pending' }, run: null });

    // Below the limit: the send goes through, and the queued follow-up is admitted when its run ends.
    await cancel(mallory, t3!.run_id);
    const sent = await json(await post(`/v1/threads/${t1!.id}/messages`, mallory, { prompt: 'one more' }), 202);
    expect(sent).toMatchObject({ status: 'accepted', run_status: 'queued' });
    await cancel(mallory, t2!.run_id);
    const controls = await waitFor('the queued follow-up to be applied', async () => {
      const list = await json(await stack.fetch(`/v1/threads/${t2!.id}/controls`, { user: mallory }), 200, ControlList);
      return list.controls[0]?.status === 'applied' ? list : undefined;
    });
    expect(controls.controls[0]).toMatchObject({ status: 'applied', created_run_id: expect.any(String) });
    expect(t4.run_status).toBe('queued');
  });
});

describe('threads per minute per user', () => {
  it('answers 429 with Retry-After past the limit, writing nothing; replays and other users are not held back', async () => {
    const trudy = await stack.createUser();
    const threads: ThreadWithRun[] = [];
    for (let i = 0; i < PER_MINUTE; i += 1) {
      const thread = await created(trudy, { client_request_id: `c-${i}` });
      threads.push(thread);
      // Ended at once: this is about how fast threads are made, not how many run.
      await cancel(trudy, thread.run_id);
    }
    const before = await footprint(trudy);
    const refused = await expectError(await create(trudy, '/v1/tasks'), 429, 'rate_limited');
    // Until the oldest of the minute's creations leaves the window.
    const retryAfter = Number(refused.headers.get('retry-after'));
    expect(Number.isInteger(retryAfter)).toBe(true);
    const untilOldestLeaves = (Date.parse(threads[0]!.created_at) + 60_000 - Date.now()) / 1000;
    expect(retryAfter).toBeGreaterThanOrEqual(Math.max(1, Math.floor(untilOldestLeaves)));
    expect(retryAfter).toBeLessThanOrEqual(Math.ceil(untilOldestLeaves) + 2);
    expect(await footprint(trudy)).toEqual(before);

    const replay = await created(trudy, { client_request_id: 'c-0' });
    expect(replay.id).toBe(threads[0]!.id);
    await created(await stack.createUser());
  });
});

describe('bounded lists', () => {
  let owner: TestUser;
  let ids: string[];
  beforeAll(async () => {
    owner = await stack.createUser();
    ids = [];
    for (let i = 0; i < 5; i += 1) {
      const thread = await created(owner, { ...(i % 2 ? { name: `odd ${i}` } : {}) });
      await cancel(owner, thread.run_id);
      ids.unshift(thread.id);
    }
  });

  async function pages<T extends { next_cursor?: string | null | undefined }>(
    path: string,
    schema: { parse(v: unknown): T },
  ): Promise<T[]> {
    const all: T[] = [];
    let cursor: string | null | undefined;
    do {
      const sep = path.includes('?') ? '&' : '?';
      const url = cursor ? `${path}${sep}cursor=${encodeURIComponent(cursor)}` : path;
      const page = await json(await stack.fetch(url, { user: owner }), 200, schema);
      all.push(page);
      cursor = page.next_cursor;
    } while (cursor);
    return all;
  }

  it('pages /v1/tasks newest first, every task exactly once', async () => {
    const list = await pages('/v1/tasks?limit=2', TaskList);
    expect(list.map((p) => p.tasks.length)).toEqual([2, 2, 1]);
    expect(list.flatMap((p) => p.tasks.map((t) => t.id))).toEqual(ids);
    expect(list.at(-1)?.next_cursor).toBeNull();
    // No parameters: the first page of the default size, in the contract's shape.
    const all = await json(await stack.fetch('/v1/tasks', { user: owner }), 200, TaskList);
    expect(all.tasks.map((t) => t.id)).toEqual(ids);
  });

  it('pages /v1/work by thread, every thread exactly once', async () => {
    const list = await pages('/v1/work?limit=2', WorkList);
    expect(list).toHaveLength(3);
    expect(list.flatMap((p) => p.projects.flatMap((project) => project.threads.map((t) => t.id)))).toEqual(ids);
  });

  it('refuses a page size past the maximum and a cursor it did not hand out', async () => {
    for (const query of ['limit=0', 'limit=201', 'limit=x']) {
      await expectError(await stack.fetch(`/v1/tasks?${query}`, { user: owner }), 400, 'invalid_request');
      await expectError(await stack.fetch(`/v1/work?${query}`, { user: owner }), 400, 'invalid_request');
    }
    await expectError(await stack.fetch('/v1/tasks?cursor=bogus', { user: owner }), 400, 'invalid_request');
  });
});

import { ThreadWithRun } from '@threadwork/contracts';
import { connectMongo, serviceDbName, type Db, type MongoClient } from '@threadwork/platform';
import { waitFor } from '@threadwork/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startStack, type Stack, type TestUser } from './support/stack.js';

// What the threads service keeps only for a while: idempotency records (a client_request_id is
// bound to its request for IDEMPOTENCY_TTL_MS, then free again) and the hidden message of a send
// that never started a run (removed once no retry can show it). The window is short here; the
// tests wait for its effects as conditions, never for a time.

const TTL_MS = 10_000;

let stack: Stack;
let alice: TestUser;
let repoId: number;
let mongo: MongoClient;
let threadsDb: Db;

beforeAll(async () => {
  stack = await startStack({ IDEMPOTENCY_TTL_MS: String(TTL_MS), SWEEP_INTERVAL_MS: '250' });
  alice = await stack.createUser('alice');
  repoId = await stack.addRepo('chores');
  mongo = await connectMongo({ url: stack.env.MONGO_URL!, appName: 'housekeeping-test' });
  threadsDb = mongo.db(serviceDbName(stack.env.MONGO_DB_PREFIX!, 'threads'));
});
afterAll(async () => {
  await mongo?.close();
  await stack?.stop();
});

async function create(clientRequestId: string): Promise<ThreadWithRun> {
  const res = await stack.fetch('/v1/threads', {
    method: 'POST',
    user: alice,
    body: JSON.stringify({ repository_id: repoId, prompt: 'Tidy up', client_request_id: clientRequestId }),
  });
  expect(res.status).toBe(202);
  return ThreadWithRun.parse(await res.json());
}

describe('idempotency records', () => {
  it('bind a client_request_id for the window, then free it and are swept away', async () => {
    const first = await create('tidy-1');
    // A replay inside the window (it starts at the first create) gets the first answer.
    expect((await create('tidy-1')).id).toBe(first.id);
    const key = `${alice.id}:create:tidy-1`;
    expect(await threadsDb.collection('requests').countDocuments({ _id: key as never })).toBe(1);

    // Past the window the record is swept, and the same id starts a request of its own.
    await waitFor('the record to be swept', async () =>
      (await threadsDb.collection('requests').countDocuments({ _id: key as never })) === 0 ? true : undefined,
    );
    const later = await create('tidy-1');
    expect(later.id).not.toBe(first.id);
    expect((await create('tidy-1')).id).toBe(later.id);
  });
});

describe('a refused send', () => {
  it('leaves a hidden message that is removed once its window has passed, and nothing shown', async () => {
    // No runner here: the first run stays queued, so the thread is busy.
    const thread = await create('busy-1');
    const res = await stack.fetch(`/v1/threads/${thread.id}/messages`, {
      method: 'POST',
      user: alice,
      body: JSON.stringify({ prompt: 'and this too', message_id: 'refused-1' }),
    });
    expect(res.status).toBe(409);
    const messages = threadsDb.collection('messages');
    const hidden = { thread_id: thread.id, message_id: 'refused-1', visible: false };
    expect(await messages.countDocuments(hidden)).toBe(1);

    await waitFor('the hidden message to be removed', async () =>
      (await messages.countDocuments(hidden)) === 0 ? true : undefined,
    );
    // The thread's own first message is untouched, and shown.
    const page = (await (await stack.fetch(`/v1/tasks/${thread.id}`, { user: alice })).json()) as {
      messages: { id: string }[];
    };
    expect(page.messages.map((m) => m.id)).toEqual([thread.message_id]);
  });
});

describe('the window without a sweep', () => {
  it('frees a client_request_id when its window has passed, even while the record is still there', async () => {
    const quiet = await startStack({ IDEMPOTENCY_TTL_MS: String(TTL_MS), SWEEP_INTERVAL_MS: '0' });
    try {
      const bob = await quiet.createUser('bob');
      const repo = await quiet.addRepo('quiet');
      const createAs = async () => {
        const res = await quiet.fetch('/v1/threads', {
          method: 'POST',
          user: bob,
          body: JSON.stringify({ repository_id: repo, prompt: 'Once', client_request_id: 'once-1' }),
        });
        expect(res.status).toBe(202);
        return ThreadWithRun.parse(await res.json()).id;
      };
      const first = await createAs();
      expect(await createAs()).toBe(first);
      // Nothing sweeps here: the claim itself sees the record has expired and binds the id afresh.
      const later = await waitFor('the id to be free again', async () => {
        const id = await createAs();
        return id === first ? undefined : id;
      });
      expect(await createAs()).toBe(later);
    } finally {
      await quiet.stop();
    }
  });
});

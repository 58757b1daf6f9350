import {
  ControlSubmission,
  MessageAccepted,
  TaskList,
  THREAD_PAGE_BYTES_MAX,
  ThreadWithRun,
  WorkList,
  rpc,
} from '@threadwork/contracts';
import { waitFor } from '@threadwork/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  startHarness,
  startHarnessWithDoubles,
  type BaseHarness,
  type DoublesHarness,
  type Harness,
} from './support/harness.js';

// The per-user limits of the threads service (MAX_LIVE_RUNS_PER_USER, THREADS_PER_MINUTE_PER_USER)
// and the bounded task and work lists, against the real runs and repohost services.

/** Everything threads stored for one owner, by collection: a refused request must change none of it. */
async function footprint(h: Pick<Harness, 'db'>, owner: string) {
  const threads = await h.db.collection('threads').find({ owner_id: owner }).toArray();
  const threadIds = threads.map((t) => t._id as unknown as string);
  const count = (collection: string, filter: Record<string, unknown>) =>
    h.db.collection(collection).countDocuments(filter);
  return {
    projects: await count('projects', { owner_id: owner }),
    threads: threads.length,
    messages: await count('messages', { thread_id: { $in: threadIds } }),
    controls: await count('controls', { owner_id: owner }),
    requests: await count('requests', { owner_id: owner }),
    waits: await count('capacity_waits', { owner_id: owner }),
  };
}

/** A user's thread creation (on the primary repository unless `body` says otherwise). */
const createFor = (h: BaseHarness, owner: string, body: Record<string, unknown> = {}) =>
  h.call(rpc.threads.create, {
    owner_id: owner,
    view: 'thread',
    body: { repository_id: h.repos.app, prompt: 'Go', ...body },
  });

/** Two replicas, so that a user's requests are spread over both as in a deployment; two live runs a user. */
const TWO_LIVE_RUNS = {
  replicas: 2,
  env: { MAX_LIVE_RUNS_PER_USER: '2', THREADS_PER_MINUTE_PER_USER: '0' },
};

/** A fresh user with two live runs (each a thread of its own), the first created with a client_request_id. */
async function atLimitOn(h: BaseHarness) {
  const owner = h.newOwner();
  const first = ThreadWithRun.parse(await createFor(h, owner, { client_request_id: 'first' }));
  const second = ThreadWithRun.parse(await createFor(h, owner));
  return { owner, first, second };
}

describe('live runs per user (MAX_LIVE_RUNS_PER_USER=2)', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(TWO_LIVE_RUNS);
  });
  afterAll(async () => {
    await h?.stop();
  });

  it('refuses a third create with too_many_runs and writes nothing; a replay still answers; room frees when a run ends', async () => {
    const { owner, first, second } = await atLimitOn(h);
    const before = await footprint(h, owner);
    const admissions = h.runs.admissions.length;

    for (const body of [{}, { client_request_id: 'third' }, { message_id: 'm-3', name: 'third' }]) {
      const refused = await h.callError(rpc.threads.create, {
        owner_id: owner,
        view: 'task',
        body: { repository_id: h.repos.app, prompt: 'One too many', ...body },
      });
      expect(refused.code).toBe('too_many_runs');
    }
    expect(await footprint(h, owner)).toEqual(before);
    expect(h.runs.admissions.length).toBe(admissions);

    // The first create's retry gets its first answer: it admits nothing new.
    const replay = ThreadWithRun.parse(await createFor(h, owner, { client_request_id: 'first' }));
    expect(replay).toMatchObject({ id: first.id, run_id: first.run_id });

    // Another user is not affected.
    expect(ThreadWithRun.parse(await createFor(h, h.newOwner())).run_status).toBe('queued');

    await h.runs.end(second.run_id, 'completed');
    const third = ThreadWithRun.parse(await createFor(h, owner, { client_request_id: 'third' }));
    expect(third.run_status).toBe('queued');
    expect(
      (
        await h.callError(rpc.threads.create, {
          owner_id: owner,
          view: 'thread',
          body: { repository_id: h.repos.app, prompt: 'x' },
        })
      ).code,
    ).toBe('too_many_runs');
  });

  it('refuses a send to an idle thread, or a queue on one, with nothing written; a busy thread says thread_busy', async () => {
    const { owner, first, second } = await atLimitOn(h);
    await h.runs.end(first.run_id, 'completed');
    const third = ThreadWithRun.parse(await createFor(h, owner));
    const idle = { owner_id: owner, thread_id: first.id };
    const before = await footprint(h, owner);

    const sent = await h.callError(rpc.threads.message, {
      ...idle,
      body: { prompt: 'More', client_request_id: 's-1' },
    });
    expect(sent.code).toBe('too_many_runs');
    const queued = await h.callError(rpc.threads.queue, {
      ...idle,
      body: { prompt: 'Later', client_request_id: 'q-1' },
    });
    expect(queued.code).toBe('too_many_runs');
    const busy = await h.callError(rpc.threads.message, {
      owner_id: owner,
      thread_id: second.id,
      body: { prompt: 'More' },
    });
    expect(busy.code).toBe('thread_busy');
    expect(await footprint(h, owner)).toEqual(before);

    // Below the limit the same send goes through.
    await h.runs.cancel(third.run_id);
    const accepted = MessageAccepted.parse(
      await h.call(rpc.threads.message, { ...idle, body: { prompt: 'More', client_request_id: 's-1' } }),
    );
    expect(accepted.run_status).toBe('queued');
  });
});

// The runs service sends a run's end as it stores it; only the doubles let a test act in between.
describe('live runs per user, a run ended before its event is handled (MAX_LIVE_RUNS_PER_USER=2)', () => {
  let h: DoublesHarness;
  beforeAll(async () => {
    h = await startHarnessWithDoubles(TWO_LIVE_RUNS);
  });
  afterAll(async () => {
    await h?.stop();
  });

  it('keeps a queued follow-up pending while the user is at the limit, and admits it when one of their runs ends', async () => {
    const { owner, first, second } = await atLimitOn(h);
    // Accepted behind the active run: queueing admits nothing now.
    const submission = ControlSubmission.parse(
      await h.call(rpc.threads.queue, {
        owner_id: owner,
        thread_id: first.id,
        body: { prompt: 'Next', client_request_id: 'q-next' },
      }),
    );
    expect(submission).toMatchObject({ control: { status: 'pending' }, run: null });

    // The first run ends, and before its end is handled the user fills its place with a new thread.
    h.runs.setStatus(first.run_id, 'completed');
    const third = ThreadWithRun.parse(await createFor(h, owner));
    const { seq } = await h.runs.transition(first.run_id, 'completed');
    await h.handledUpTo(seq);
    const controls = async () =>
      (await h.call(rpc.threads.controls, { owner_id: owner, thread_id: first.id, view: 'thread' })).controls;
    expect(await controls()).toMatchObject([{ id: submission.control.id, status: 'pending', created_run_id: null }]);
    expect(h.runs.created(first.id)).toHaveLength(1);
    expect((await footprint(h, owner)).waits).toBe(1);

    // Another of the user's runs ends (on another thread): the waiting follow-up gets its place.
    const ended = await h.runs.transition(second.run_id, 'completed');
    await h.handledUpTo(ended.seq);
    const [applied] = await waitFor(
      'the waiting follow-up to be applied',
      async () => {
        const list = await controls();
        expect(list[0]?.status).toBe('applied');
        return list;
      },
      60_000,
      { tolerateErrors: true },
    );
    expect(applied?.created_run_id).toBeTruthy();
    expect(h.runs.run(applied!.created_run_id!)).toMatchObject({ thread_id: first.id, status: 'queued' });
    expect((await footprint(h, owner)).waits).toBe(0);
    // Still two live: the third thread's run and the follow-up's.
    expect(h.runs.run(third.run_id).terminal).toBe(false);
  });
});

describe('threads per minute per user (THREADS_PER_MINUTE_PER_USER=3)', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ env: { MAX_LIVE_RUNS_PER_USER: '0', THREADS_PER_MINUTE_PER_USER: '3' } });
  });
  afterAll(async () => {
    await h?.stop();
  });

  it('refuses the fourth creation within a minute with rate_limited and a retry time, writing nothing', async () => {
    const owner = h.newOwner();
    const created = [];
    for (let i = 0; i < 3; i += 1) {
      created.push(
        ThreadWithRun.parse(
          await h.call(rpc.threads.create, {
            owner_id: owner,
            view: 'thread',
            body: { repository_id: h.repos.app, prompt: `Thread ${i}`, client_request_id: `c-${i}` },
          }),
        ),
      );
    }
    const before = await footprint(h, owner);
    const refused = await h.callError(rpc.threads.create, {
      owner_id: owner,
      view: 'task',
      body: { repository_id: h.repos.app, prompt: 'Thread 3' },
    });
    expect(refused.code).toBe('rate_limited');
    const retryAfter = refused.details?.['retry_after_seconds'];
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
    expect(await footprint(h, owner)).toEqual(before);

    // A replay is not a new thread; sends are not creations; another user has a window of their own.
    const replay = await h.call(rpc.threads.create, {
      owner_id: owner,
      view: 'thread',
      body: { repository_id: h.repos.app, prompt: 'Thread 0', client_request_id: 'c-0' },
    });
    expect(replay.id).toBe(created[0]!.id);
    await h.runs.end(created[0]!.run_id, 'completed');
    const sent = await h.call(rpc.threads.message, {
      owner_id: owner,
      thread_id: created[0]!.id,
      body: { prompt: 'Follow-up' },
    });
    expect(sent.status).toBe('accepted');
    expect(
      (
        await h.call(rpc.threads.create, {
          owner_id: h.newOwner(),
          view: 'thread',
          body: { repository_id: h.repos.app, prompt: 'x' },
        })
      ).run_status,
    ).toBe('queued');
  });
});

describe('task and work pages', () => {
  let h: Harness;
  let owner: string;
  /** Thread ids, newest first. */
  let ids: string[];

  beforeAll(async () => {
    h = await startHarness({ env: { MAX_LIVE_RUNS_PER_USER: '2', THREADS_PER_MINUTE_PER_USER: '0' } });
    owner = h.newOwner();
    ids = [];
    // Prompts as long as allowed, of characters JSON writes as six bytes each: the largest a work
    // thread gets (about 25 KB), so a page of them ends by size long before its limit.
    const prompt = '\u0001'.repeat(4096);
    for (let i = 0; i < 30; i += 1) {
      const created = ThreadWithRun.parse(
        await h.call(rpc.threads.create, {
          owner_id: owner,
          view: 'thread',
          // Two projects, alternating.
          body: { repository_id: h.repos.app, prompt, ...(i % 2 ? { repository_ids: [h.repos.lib] } : {}) },
        }),
      );
      // Ended at once, so the live-run limit leaves room for the next.
      await h.runs.end(created.run_id, 'completed');
      ids.unshift(created.id);
    }
  });
  afterAll(async () => {
    await h?.stop();
  });

  it('pages the tasks newest first, each exactly once, ending with a null cursor', async () => {
    const seen: string[] = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      const page = TaskList.parse(
        await h.call(rpc.threads.list, { owner_id: owner, limit: 7, ...(cursor ? { cursor } : {}) }),
      );
      expect(page.tasks.length).toBeLessThanOrEqual(7);
      seen.push(...page.tasks.map((t) => t.id));
      cursor = page.next_cursor ?? undefined;
      pages += 1;
    } while (cursor);
    expect(pages).toBe(5);
    expect(seen).toEqual(ids);
    // Without a limit: the default page, and the contract's shape.
    const first = TaskList.parse(await h.call(rpc.threads.list, { owner_id: owner }));
    expect(first.tasks.map((t) => t.id)).toEqual(ids);
    expect(first.next_cursor).toBeNull();
    expect((await h.callError(rpc.threads.list, { owner_id: owner, cursor: 'not-a-cursor' })).code).toBe(
      'invalid_request',
    );
  });

  it('pages the work list by thread, cut by size below NATS max_payload, each thread exactly once', async () => {
    const seen: string[] = [];
    const projects = new Set<string>();
    let cursor: string | undefined;
    let pages = 0;
    do {
      const raw = await h.call(rpc.threads.work, { owner_id: owner, limit: 200, ...(cursor ? { cursor } : {}) });
      expect(Buffer.byteLength(JSON.stringify(raw))).toBeLessThanOrEqual(THREAD_PAGE_BYTES_MAX);
      const page = WorkList.parse(raw);
      const threads = page.projects.flatMap((p) => p.threads);
      // Ended by size, not by the limit of 200.
      if (page.next_cursor) expect(threads.length).toBeLessThan(30);
      for (const project of page.projects) {
        projects.add(project.id);
        expect(project.threads.every((t) => t.project_id === project.id)).toBe(true);
      }
      // Grouped by project within a page; across pages, newest first.
      seen.push(...threads.map((t) => t.id).sort((a, b) => ids.indexOf(a) - ids.indexOf(b)));
      cursor = page.next_cursor ?? undefined;
      pages += 1;
    } while (cursor);
    expect(pages).toBeGreaterThan(1);
    expect(seen).toEqual(ids);
    expect(projects.size).toBe(2);
  });
});

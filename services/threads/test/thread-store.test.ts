import { connectMongo, newId, type Db, type MongoClient } from '@threadwork/platform';
import { testInfra, uniqueDbPrefix } from '@threadwork/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ThreadRecord } from '../src/store/records.js';
import { createThreadStore } from '../src/store/threads.js';

// Creation, the domain events and every replica touch a thread, each taking its time before its
// write lands; a write that lands later with an earlier time must not move updated_at back.

describe('thread store', () => {
  let mongo: MongoClient;
  let db: Db;

  beforeAll(async () => {
    mongo = await connectMongo({ url: testInfra().mongoUrl, appName: 'threads-store-test' });
    db = mongo.db(`${uniqueDbPrefix()}_threads`);
  });
  afterAll(async () => {
    await mongo?.close();
  });

  const created = new Date('2026-01-01T00:00:00.000Z');
  const later = (ms: number) => new Date(created.getTime() + ms);

  const insertThread = async (): Promise<string> => {
    const id = newId('thr');
    const thread: ThreadRecord = {
      _id: id,
      owner_id: 'usr_store',
      project_id: 'prj_store',
      name: null,
      prompt: 'Fix the build',
      harness: null,
      model: null,
      reasoning_effort: null,
      collaboration_mode: null,
      branch: 'main',
      repohost_url: 'https://github.test/acme/app',
      repositories: [],
      first_run_id: 'run_1',
      latest_run_id: null,
      latest_run_created_at: null,
      sandbox_status: null,
      sandbox_status_at: null,
      created_at: created,
      updated_at: created,
    };
    await createThreadStore(db).insertThreadIfAbsent(thread);
    return id;
  };

  const updatedAt = async (id: string) => (await createThreadStore(db).getThread(id))?.updated_at;

  it('moves updated_at forward only, whichever touch lands last', async () => {
    const id = await insertThread();
    // Each writer took its time when it began; they land in the other order.
    const slow = createThreadStore(db, () => later(10));
    const fast = createThreadStore(db, () => later(30));

    await fast.recordRun(id, {
      id: 'run_1',
      created_at: created,
      harness: 'codex',
      model: 'gpt-5',
      reasoning_effort: 'medium',
      collaboration_mode: 'default',
    });
    expect(await updatedAt(id)).toEqual(later(30));

    await slow.setSandboxStatus(id, 'ready', later(5));
    await slow.setCandidateStats(id, 'prr_1', { additions: 1, deletions: 0, at: later(5) });
    const thread = await createThreadStore(db).getThread(id);
    // Their changes are kept; only the time stays.
    expect(thread).toMatchObject({ sandbox_status: 'ready', candidate_stats: { prr_1: { additions: 1 } } });
    expect(thread?.updated_at).toEqual(later(30));

    await createThreadStore(db, () => later(40)).setSandboxStatus(id, 'stopped', later(35));
    expect(await updatedAt(id)).toEqual(later(40));
  });

  it('leaves updated_at alone when the same run is recorded again', async () => {
    const id = await insertThread();
    const run = {
      id: 'run_1',
      created_at: created,
      harness: 'codex',
      model: 'gpt-5',
      reasoning_effort: 'medium',
      collaboration_mode: 'default' as const,
    };
    await createThreadStore(db, () => later(10)).recordRun(id, run);
    await createThreadStore(db, () => later(20)).recordRun(id, run);
    expect(await updatedAt(id)).toEqual(later(10));
  });
});

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { rpc } from '@threadwork/contracts';
import { request, serviceDbName } from '@threadwork/platform';
import { startFerretDb, waitFor, type LocalServer } from '@threadwork/testing';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { admission, getRun, runningRun, startHarness, statusLog, type Harness } from './helpers.js';

// A run's end meeting a database that is too busy to take a write. Under load (a chaos race of
// twenty threads whose runs end while their clients send, queue and steer), FerretDB on SQLite
// refuses a write it waited too long for with `database is locked (SQLITE_BUSY)`, having written
// nothing. The runs service took that for a bug and answered the runner's report of the run's end
// with `internal error`. Here the busy database is made on purpose: the write lock of the runs
// service's SQLite file is held by this test (as a long write of another client would hold it),
// on a FerretDB of this file's own, until FerretDB has refused a write of the service as busy.

const ferretdbBin = inject('ferretdbBin');
const terminal = ['completed', 'cancelled'];

describe.skipIf(!ferretdbBin)('a run ending while its database is busy', () => {
  let dir: string;
  let ferret: LocalServer;
  let h: Harness;
  /** Writes FerretDB has refused because its database was locked. */
  let busyRefusals = 0;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'threadwork-runs-busy-'));
    ferret = await startFerretDb({
      binary: ferretdbBin,
      dir,
      onLine: (line) => {
        if (line.includes('SQLITE_BUSY')) busyRefusals++;
      },
    });
    h = await startHarness({ MONGO_URL: ferret.url });
  });

  afterAll(async () => {
    await h?.stop();
    await ferret?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  /** Takes the write lock of the runs service's database file; the function returned lets it go. */
  function lockRunsDatabase(): () => void {
    // startFerretDb keeps one SQLite file per database under `dir`/db.
    const db = new DatabaseSync(join(dir, 'db', `${serviceDbName(h.dbPrefix, 'runs')}.sqlite`));
    db.exec('PRAGMA busy_timeout = 60000');
    db.exec('BEGIN IMMEDIATE');
    return () => {
      db.exec('COMMIT');
      db.close();
    };
  }

  it('answers the runner, the cancel and the live-run look that raced the end with the one outcome, never internal', async () => {
    const { run, owner, attempt, claim_id, thread_id } = await runningRun(h.nc);
    const settled = <T>(promise: Promise<T>) =>
      promise.then(
        (value) => ({ ok: true as const, value }),
        (err: unknown) => ({ ok: false as const, err }),
      );
    // A hang guard only: each refusal comes after FerretDB's busy timeout, seconds each.
    const patient = { timeoutMs: 120_000 };
    const release = lockRunsDatabase();
    const refusedBefore = busyRefusals;
    // The runner reports the end while the user cancels it and the threads service looks for the
    // thread's live run (as it does before admitting the next message; it finishes an end it finds
    // decided): whichever decides the end, each caller must get the one outcome.
    const completion = settled(
      request(h.nc, rpc.runs.transition, { run_id: run.id, attempt, claim_id, to: 'completed' }, patient),
    );
    const cancel = settled(request(h.nc, rpc.runs.cancel, { owner_id: owner, run_id: run.id }, patient));
    const live = settled(request(h.nc, rpc.runs.live, { owner_id: owner, thread_id }, patient));
    try {
      await waitFor('FerretDB to refuse a write of the runs service as busy', () => busyRefusals > refusedBefore);
    } finally {
      release();
    }

    const [ended, cancelled, looked] = await Promise.all([completion, cancel, live]);
    expect(ended.ok ? null : ended.err, 'the runner’s report of the end').toBeNull();
    expect(cancelled.ok ? null : cancelled.err, 'the user’s cancel').toBeNull();
    expect(looked.ok ? null : looked.err, 'the live-run look').toBeNull();
    const outcome = ended.ok ? ended.value : undefined;
    expect(outcome).toMatchObject({ terminal: true });
    expect(terminal).toContain(outcome?.status);

    // Nothing is half-written: the run is ended as the runner was told, once, at the end of its log.
    const log = await statusLog(h, run.id);
    expect(log.at(-1)).toBe(outcome?.status);
    expect(log.filter((status) => terminal.includes(status))).toHaveLength(1);
    expect(await getRun(h, run.id)).toMatchObject({ status: outcome?.status, terminal: true });
    expect(await request(h.nc, rpc.runs.live, { owner_id: owner, thread_id })).toEqual({ run: null });
    // The thread is free for its next run.
    const next = await request(h.nc, rpc.runs.admit, admission({ owner_id: owner, thread_id }));
    expect(next).toMatchObject({ created: true, run: { status: 'queued' } });
  });
});

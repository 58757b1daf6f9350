import type { CandidateProducedEvent } from '@threadwork/contracts';
import { connectMongo, type MongoClient } from '@threadwork/platform';
import { testInfra, uniqueDbPrefix } from '@threadwork/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSnapshotStore, snapshotId, type SnapshotStore } from '../src/store/snapshots.js';

// Review handles DOMAIN events concurrently (and on every replica): candidates of one repository
// arriving at once, in any order, must leave the newest stored, on the real database.

describe('review snapshots', () => {
  let mongo: MongoClient;
  let store: SnapshotStore;

  beforeAll(async () => {
    mongo = await connectMongo({ url: testInfra().mongoUrl, appName: 'review-snapshots-test' });
    store = createSnapshotStore(mongo.db(`${uniqueDbPrefix()}_review`));
  });
  afterAll(async () => {
    await mongo?.close();
  });

  const candidate = (threadId: string, n: number, at: Date): CandidateProducedEvent => ({
    thread_id: threadId,
    run_id: `run_${n}`,
    owner_id: 'usr_snapshots',
    project_repository_id: 'prr_1',
    repository_id: 1,
    branch: `threadwork/${threadId}`,
    base_branch: 'main',
    base_revision: 'b'.repeat(40),
    candidate_revision: n.toString(16).padStart(40, 'c'),
    diff: `+entry ${n}\n`,
    truncated: false,
    files: [{ path: 'CHANGELOG.md', status: 'added' }],
    stats: { additions: n, deletions: 0 },
    at: at.toISOString(),
  });

  it('keeps the newest of candidates saved at once, whichever write lands first', async () => {
    const base = Date.now();
    for (let round = 0; round < 10; round++) {
      const threadId = `thr_round${round}`;
      // Eight candidates a second apart, saved at once in an order that differs each round.
      const events = Array.from({ length: 8 }, (_, n) => candidate(threadId, n + 1, new Date(base + n * 1_000)));
      const order = events.map((_, i) => events[(i * 3 + round) % events.length]!);
      await Promise.all(order.map((event) => store.saveCandidate(event)));
      const snapshot = await store.get('usr_snapshots', threadId, 'prr_1');
      expect(snapshot?.candidate?.revision, `round ${round} (${snapshotId(threadId, 'prr_1')})`).toBe(
        events.at(-1)!.candidate_revision,
      );
    }
  });
});

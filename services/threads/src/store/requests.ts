import { conflict, ensureIndexes, mongoCall, unavailable, type Collection, type Db } from '@threadwork/platform';
import { insertIfAbsent } from './insert.js';
import type { RequestRecord } from './records.js';

/** The idempotency records: one per owner, operation and `client_request_id`, for `idempotencyTtlMs`. */
export function createRequestStore(db: Db, idempotencyTtlMs: number) {
  const requests = db.collection<RequestRecord>('requests');

  return {
    async ensureIndexes(): Promise<void> {
      await ensureIndexes(requests, [
        {
          key: { created_at: 1 },
          options: { name: 'created' },
          serves: 'the sweep: idempotency records past their window (claims look up by _id)',
        },
      ]);
    },

    /**
     * Binds a client_request_id to a request: the first caller's insert wins and fixes the ids; any
     * later caller with the same request gets those ids, with a different one a conflict.
     */
    async claimRequest<Ids extends Record<string, string>>(
      key: string,
      ownerId: string,
      bodyHash: string,
      candidate: Ids,
    ): Promise<Ids> {
      // Twice at most: a record found past its window is removed and the claim made afresh.
      for (let attempt = 0; ; attempt++) {
        const now = new Date();
        const record: RequestRecord<Ids> = {
          _id: key,
          owner_id: ownerId,
          body_hash: bodyHash,
          ids: candidate,
          created_at: now,
        };
        if (await insertIfAbsent(requests as unknown as Collection<RequestRecord<Ids>>, record)) return candidate;
        const winner = await mongoCall(() => requests.findOne({ _id: key }));
        // The duplicate-key error means the winner's document is committed; not finding it is a
        // transient oddity of the server (or a sweep that just removed it), worth a retry rather
        // than a second set of ids.
        if (!winner) throw unavailable('idempotency record not readable yet');
        if (winner.created_at.getTime() <= now.getTime() - idempotencyTtlMs && attempt === 0) {
          // Expired: the id is free. Removed only as found (same time), so a fresh claim that
          // raced us here is never the one removed; whoever inserts next wins, as for a new id.
          await mongoCall(() => requests.deleteOne({ _id: key, created_at: winner.created_at }));
          continue;
        }
        if (winner.body_hash !== bodyHash) {
          throw conflict('idempotency_conflict', 'client_request_id was already used with a different request');
        }
        return winner.ids as Ids;
      }
    },

    /** Whether a `client_request_id` is bound already (a replay, or a twin of a request in flight). */
    async hasRequest(key: string): Promise<boolean> {
      const record = await mongoCall(() => requests.findOne({ _id: key }));
      return record !== null && record.created_at.getTime() > Date.now() - idempotencyTtlMs;
    },

    /** Idempotency records past their window, removed (claims treat them as absent already). */
    async sweepRequests(now: Date): Promise<number> {
      const before = new Date(now.getTime() - idempotencyTtlMs);
      const { deletedCount } = await mongoCall(() => requests.deleteMany({ created_at: { $lt: before } }));
      return deletedCount;
    },
  };
}

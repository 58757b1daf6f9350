import { ensureIndexes, isDuplicateKeyError, mongoCall, type Collection, type Db } from '@threadwork/platform';

// Who holds a run: the attempts runners claimed, when their holders were last heard from, and the
// DOMAIN events the holders attested.

/** A runner's claim on one attempt of a run: `_id` is `${run_id}:${attempt}`, first insert wins. */
export interface AttemptDoc {
  _id: string;
  run_id: string;
  attempt: number;
  runner_id: string;
  /** SHA-256 (hex) of the runner's claim id: its retries find the attempt, its holder proves itself. */
  claim_sha256?: string;
  at: Date;
  /**
   * When the holder was last heard from (its claim, moves, appends, polls), written at most every
   * quarter lease; absent: `at`. A claim of a run whose holder's lease has not run out is refused.
   * The only field of an attempt that changes: a lost write of it only shortens the lease.
   */
  heard_at?: Date;
  /** Set when the holder handed the run back: its lease is over, whatever `heard_at` says. */
  released_at?: Date;
}

/**
 * A DOMAIN event the holder of a run said it publishes about the run (runs.attest): `_id` is
 * `${run_id}:${digest}`, written once. Services ask for it before acting on a runner's event.
 */
export interface AttestationDoc {
  _id: string;
  run_id: string;
  attempt: number;
  subject: string;
  at: Date;
}

export interface AttemptStore {
  // The collections are open to tests, which set up states no flow makes; flows read and write
  // through the functions below, which turn a database outage into `unavailable`.
  attempts: Collection<AttemptDoc>;
  attestations: Collection<AttestationDoc>;
  /**
   * Every attempt claimed so far of a run, the highest first: one read serves a claim both the
   * last attempt and the one its own claim id may have made (RUN_MAX_ATTEMPTS at most).
   */
  attemptsOf(runId: string): Promise<AttemptDoc[]>;
  attempt(runId: string, attempt: number): Promise<AttemptDoc | null>;
  /**
   * Takes an attempt; a duplicate-key error says it was taken before. The attempt taken is
   * remembered as `claimOf` and `hear` would remember it: the holder's first move or append then
   * neither reads it back nor writes a time the claim has just written.
   */
  insertAttempt(doc: AttemptDoc): Promise<void>;
  /** The holder of an attempt handed its run back at `at`. */
  releaseAttempt(runId: string, attempt: number, at: Date): Promise<void>;
  /**
   * The SHA-256 of the claim id that made attempt `attempt` of a run; null when no runner's claim
   * made it (none yet, or the unclaimed-run sweep took it). Asked on every move and append.
   */
  claimOf(runId: string, attempt: number): Promise<string | null>;
  /**
   * Notes that the holder of attempt `attempt` of a run was heard from `at`, renewing its lease. The
   * write is spared when this replica wrote it less than `everyMs` before: a busy run's appends and
   * polls cost no write each.
   */
  hear(runId: string, attempt: number, at: Date, everyMs: number): Promise<void>;
  /** Notes that this replica read the run held at attempt `attempt`, by the claim that made it, at `at`. */
  noteHeld(runId: string, attempt: number, at: Date): void;
  /**
   * Whether this replica noted the run held at attempt `attempt` less than `withinMs` before `at`
   * (noteHeld), and has not seen the attempt handed back since. No read.
   */
  heldWithin(runId: string, attempt: number, at: Date, withinMs: number): boolean;
  /** Records an attested event; attesting the same event again adds nothing. */
  attest(doc: AttestationDoc): Promise<void>;
  attestation(runId: string, digest: string): Promise<AttestationDoc | null>;
  ensureIndexes(): Promise<void>;
}

/**
 * How many attempts' claim hashes a replica remembers. An attempt is inserted once and never
 * changed, so what is remembered cannot go stale; this only spares the fence of a busy run's
 * appends a look-up each (the live runs of a replica fit many times over).
 */
const CLAIMS_REMEMBERED = 10_000;

/** Sets `key` as the newest of `map`, forgetting the oldest past CLAIMS_REMEMBERED. */
function remember<V>(map: Map<string, V>, key: string, value: V): void {
  map.delete(key);
  if (map.size >= CLAIMS_REMEMBERED) map.delete(map.keys().next().value as string);
  map.set(key, value);
}

export function createAttemptStore(db: Db): AttemptStore {
  const attempts = db.collection<AttemptDoc>('run_attempts');
  // Read and written by `_id` (run id and digest) only: the default index is all it needs.
  const attestations = db.collection<AttestationDoc>('run_attestations');

  const claims = new Map<string, string>();
  const heard = new Map<string, number>();
  // When this replica last read each run held by an attempt, and the attempts handed back through it.
  const held = new Map<string, number>();
  const released = new Map<string, true>();
  return {
    attempts,
    attestations,
    attemptsOf: (runId) => mongoCall(() => attempts.find({ run_id: runId }).sort({ attempt: -1 }).toArray()),
    attempt: (runId, attempt) => mongoCall(() => attempts.findOne({ _id: `${runId}:${attempt}` })),
    async insertAttempt(doc) {
      await mongoCall(() => attempts.insertOne(doc));
      if (doc.claim_sha256) remember(claims, doc._id, doc.claim_sha256);
      remember(heard, doc._id, (doc.heard_at ?? doc.at).getTime());
    },
    async releaseAttempt(runId, attempt, at) {
      // Before the write: from its start on, the attempt is as good as over.
      remember(released, `${runId}:${attempt}`, true);
      await mongoCall(() => attempts.updateOne({ _id: `${runId}:${attempt}` }, { $set: { released_at: at } }));
    },
    async claimOf(runId, attempt) {
      const id = `${runId}:${attempt}`;
      const known = claims.get(id);
      if (known !== undefined) return known;
      const doc = await mongoCall(() => attempts.findOne({ _id: id }));
      if (!doc?.claim_sha256) return null;
      remember(claims, id, doc.claim_sha256);
      return doc.claim_sha256;
    },
    async hear(runId, attempt, at, everyMs) {
      const id = `${runId}:${attempt}`;
      const last = heard.get(id);
      if (last !== undefined && at.getTime() - last < everyMs) return;
      // Not a decision, only a time: two replicas writing it at once both write a fresh one, and
      // one that lands late never moves it back (a lease looking older than it is ends too soon).
      await mongoCall(() => attempts.updateOne({ _id: id }, { $max: { heard_at: at } }));
      remember(heard, id, at.getTime());
    },
    noteHeld(runId, attempt, at) {
      remember(held, `${runId}:${attempt}`, at.getTime());
    },
    heldWithin(runId, attempt, at, withinMs) {
      const id = `${runId}:${attempt}`;
      const seen = held.get(id);
      return seen !== undefined && at.getTime() - seen < withinMs && !released.has(id);
    },
    async attest(doc) {
      try {
        await mongoCall(() => attestations.insertOne(doc));
      } catch (err) {
        // The same event attested again (a retried call, or a retried publish): nothing to add.
        if (!isDuplicateKeyError(err)) throw err;
      }
    },
    attestation: (runId, digest) => mongoCall(() => attestations.findOne({ _id: `${runId}:${digest}` })),
    async ensureIndexes() {
      await ensureIndexes(attempts, [
        {
          key: { run_id: 1, attempt: -1 },
          options: { name: 'run_attempt' },
          serves: "claim: a run's attempts, the highest first",
        },
      ]);
    },
  };
}

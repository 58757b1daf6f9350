import type {
  CancelledBy,
  Interaction,
  InteractionAnswerEntry,
  InteractionKind,
  InteractionStatus,
  Question,
} from '@threadwork/contracts';
import { ensureIndexes, mongoCall, type Collection, type Db } from '@threadwork/platform';
import { redactAnswers } from '../domain/interactions.js';

/** A question or plan approval of a run. `answers` are stored in clear: the runner needs them. */
export interface InteractionDoc {
  _id: string;
  run_id: string;
  thread_id: string;
  owner_id: string;
  /** The harness's id of the request, so a retried create finds the same interaction. */
  key: string;
  kind: InteractionKind;
  questions: Question[];
  status: InteractionStatus;
  answers: Record<string, InteractionAnswerEntry>;
  cancelled_by: CancelledBy | null;
  created_at: Date;
  resolved_at: Date | null;
  /**
   * False from its insert until its `interaction.requested` is in the run's log; absent on
   * interactions older than the field, which were announced. A settlement logged meanwhile logs
   * the request first, so the log never settles a question it has not asked.
   */
  announced?: boolean;
}

/**
 * How an interaction was settled, decided by inserting `_id: interaction_id` (first insert wins).
 * The interaction document is updated from it afterwards; until then this is the truth.
 */
export interface SettlementDoc {
  _id: string;
  status: Exclude<InteractionStatus, 'pending'>;
  answers: Record<string, InteractionAnswerEntry>;
  cancelled_by: CancelledBy | null;
  resolved_at: Date;
}

export interface InteractionStore {
  // The collections are open to tests, which set up states no flow makes; flows read and write
  // through the functions below, which turn a database outage into `unavailable`.
  interactions: Collection<InteractionDoc>;
  settlements: Collection<SettlementDoc>;
  interaction(interactionId: string): Promise<InteractionDoc | null>;
  /** The interaction a harness request made; `key` is the harness's id of the request. */
  interactionOfKey(runId: string, key: string): Promise<InteractionDoc | null>;
  /** Writes a new interaction; a duplicate-key error says its request made one before. */
  insertInteraction(doc: InteractionDoc): Promise<void>;
  /** A thread's interactions, oldest first. */
  threadInteractions(ownerId: string, threadId: string): Promise<InteractionDoc[]>;
  /** A run's interactions whose document still says pending. */
  pendingOfRun(runId: string): Promise<InteractionDoc[]>;
  settlement(interactionId: string): Promise<SettlementDoc | null>;
  /** Settles an interaction; a duplicate-key error says it was settled before. */
  insertSettlement(settlement: SettlementDoc): Promise<void>;
  /** Notes that the interaction's `interaction.requested` is in the run's log. */
  markAnnounced(interactionId: string): Promise<void>;
  /** Copies a settlement into its interaction. */
  applySettlement(settlement: SettlementDoc): Promise<void>;
  ensureIndexes(): Promise<void>;
  /** The interaction as settled: its document, overlaid with a settlement not yet copied into it. */
  withSettlements(docs: InteractionDoc[]): Promise<InteractionDoc[]>;
}

export function createInteractionStore(db: Db): InteractionStore {
  const interactions = db.collection<InteractionDoc>('interactions');
  const settlements = db.collection<SettlementDoc>('interaction_settlements');

  return {
    interactions,
    settlements,
    interaction: (interactionId) => mongoCall(() => interactions.findOne({ _id: interactionId })),
    interactionOfKey: (runId, key) => mongoCall(() => interactions.findOne({ run_id: runId, key })),
    async insertInteraction(doc) {
      await mongoCall(() => interactions.insertOne(doc));
    },
    threadInteractions: (ownerId, threadId) =>
      mongoCall(() =>
        interactions.find({ owner_id: ownerId, thread_id: threadId }).sort({ created_at: 1, _id: 1 }).toArray(),
      ),
    pendingOfRun: (runId) => mongoCall(() => interactions.find({ run_id: runId, status: 'pending' }).toArray()),
    settlement: (interactionId) => mongoCall(() => settlements.findOne({ _id: interactionId })),
    async insertSettlement(settlement) {
      await mongoCall(() => settlements.insertOne(settlement));
    },
    async markAnnounced(interactionId) {
      await mongoCall(() => interactions.updateOne({ _id: interactionId }, { $set: { announced: true } }));
    },
    async applySettlement(s) {
      await mongoCall(() =>
        interactions.updateOne(
          { _id: s._id },
          { $set: { status: s.status, answers: s.answers, cancelled_by: s.cancelled_by, resolved_at: s.resolved_at } },
        ),
      );
    },
    async ensureIndexes() {
      await ensureIndexes(interactions, [
        {
          key: { run_id: 1, key: 1 },
          options: { name: 'run_key_unique', unique: true },
          serves: 'interactionCreate: find the interaction of a harness request; one per (run, key)',
        },
        {
          key: { run_id: 1, status: 1 },
          options: { name: 'run_status' },
          serves: 'pending interactions of a run (resume after an answer, cancel when the run ends)',
        },
        {
          key: { owner_id: 1, thread_id: 1, created_at: 1 },
          options: { name: 'owner_thread_created' },
          serves: "interactionList: a thread's interactions, oldest first",
        },
      ]);
      // interaction_settlements is decided and read by `_id` only.
    },
    async withSettlements(docs) {
      const pending = docs.filter((d) => d.status === 'pending').map((d) => d._id);
      if (pending.length === 0) return docs;
      const found = await mongoCall(() => settlements.find({ _id: { $in: pending } }).toArray());
      const byId = new Map(found.map((s) => [s._id, s]));
      return docs.map((d) => {
        const s = byId.get(d._id);
        return s ? settledDoc(d, s) : d;
      });
    },
  };
}

export function settledDoc(doc: InteractionDoc, s: SettlementDoc): InteractionDoc {
  return { ...doc, status: s.status, answers: s.answers, cancelled_by: s.cancelled_by, resolved_at: s.resolved_at };
}

/** The public shape; secret answers never leave the service except through the runner's settlement read. */
export function toInteraction(doc: InteractionDoc): Interaction {
  return {
    id: doc._id,
    run_id: doc.run_id,
    thread_id: doc.thread_id,
    kind: doc.kind,
    status: doc.status,
    questions: doc.questions,
    answers: redactAnswers(doc.questions, doc.answers),
    created_at: doc.created_at.toISOString(),
    resolvedAt: doc.resolved_at ? doc.resolved_at.toISOString() : null,
    cancelledBy: doc.cancelled_by,
  };
}

import type {
  AnswerEntry,
  CancelledBy,
  Interaction,
  InteractionKind,
  InteractionStatus,
  Question,
} from '@threadwork/contracts';
import { ensureIndexes, type Collection, type Db } from '@threadwork/platform';
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
  answers: Record<string, AnswerEntry>;
  cancelled_by: CancelledBy | null;
  created_at: Date;
  resolved_at: Date | null;
}

/**
 * How an interaction was settled, decided by inserting `_id: interaction_id` (first insert wins).
 * The interaction document is updated from it afterwards; until then this is the truth.
 */
export interface SettlementDoc {
  _id: string;
  status: Exclude<InteractionStatus, 'pending'>;
  answers: Record<string, AnswerEntry>;
  cancelled_by: CancelledBy | null;
  resolved_at: Date;
}

export interface InteractionStore {
  interactions: Collection<InteractionDoc>;
  settlements: Collection<SettlementDoc>;
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
      const found = await settlements.find({ _id: { $in: pending } }).toArray();
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

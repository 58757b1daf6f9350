import { ensureIndexes, isDuplicateKeyError, mongoCall, type Collection, type Db } from '@threadwork/platform';

// The webhook deliveries already taken, and the signed bodies that came with them.

export interface DeliveryDoc {
  /** `X-GitHub-Delivery`: the unique `_id` takes each delivery once. */
  _id: string;
  event: string;
  received_at: Date;
}

export interface WebhookBodyDoc {
  /**
   * SHA-256 of a delivered body. GitHub signs the body only, not `X-GitHub-Delivery`: the unique
   * `_id` ties a signed body to the one delivery that brought it, so the same bytes sent again
   * under a new delivery id are known for a replay.
   */
  _id: string;
  delivery: string;
  received_at: Date;
}

export type BodyRecord = 'new' | 'same_delivery' | 'other_delivery';

/** Deliveries are remembered this long; GitHub redelivers (by hand or API) within days, not weeks. */
const DELIVERY_RETENTION_MS = 14 * 24 * 60 * 60 * 1000;

export interface WebhookDeliveryStore {
  ensureIndexes(): Promise<void>;

  /** Records a delivery; false when it was recorded before. */
  recordDelivery(delivery: string, event: string, now: Date): Promise<boolean>;
  /** Undoes `recordDelivery` when the delivery could not be queued, so GitHub's retry is taken. */
  forgetDelivery(delivery: string): Promise<void>;
  /** Ties a body (its hash) to the delivery that brought it, kept as long as deliveries are. */
  recordBody(hash: string, delivery: string, now: Date): Promise<BodyRecord>;
  /** Undoes `recordBody` for this delivery (the delivery could not be queued). */
  forgetBody(hash: string, delivery: string): Promise<void>;
}

export function createWebhookDeliveryStore(db: Db): WebhookDeliveryStore {
  const deliveries: Collection<DeliveryDoc> = db.collection('webhook_deliveries');
  const bodies: Collection<WebhookBodyDoc> = db.collection('webhook_bodies');

  return {
    async ensureIndexes() {
      await ensureIndexes(deliveries, [
        {
          key: { received_at: 1 },
          options: { name: 'received' },
          serves: 'sweeping deliveries older than the retention',
        },
      ]);
      await ensureIndexes(bodies, [
        {
          key: { received_at: 1 },
          options: { name: 'received' },
          serves: 'sweeping bodies older than the retention',
        },
      ]);
    },

    async recordDelivery(delivery, event, now) {
      try {
        await mongoCall(() => deliveries.insertOne({ _id: delivery, event, received_at: now }));
      } catch (err) {
        if (isDuplicateKeyError(err)) return false;
        throw err;
      }
      await mongoCall(() =>
        deliveries.deleteMany({ received_at: { $lt: new Date(now.getTime() - DELIVERY_RETENTION_MS) } }),
      );
      return true;
    },

    async forgetDelivery(delivery) {
      await mongoCall(() => deliveries.deleteOne({ _id: delivery }));
    },

    async recordBody(hash, delivery, now) {
      for (;;) {
        try {
          await mongoCall(() => bodies.insertOne({ _id: hash, delivery, received_at: now }));
          break;
        } catch (err) {
          if (!isDuplicateKeyError(err)) throw err;
        }
        const held = await mongoCall(() => bodies.findOne({ _id: hash }));
        if (held) return held.delivery === delivery ? 'same_delivery' : 'other_delivery';
        // Forgotten in between (its delivery could not be queued): try to take it again.
      }
      await mongoCall(() =>
        bodies.deleteMany({ received_at: { $lt: new Date(now.getTime() - DELIVERY_RETENTION_MS) } }),
      );
      return 'new';
    },

    async forgetBody(hash, delivery) {
      await mongoCall(() => bodies.deleteOne({ _id: hash, delivery }));
    },
  };
}

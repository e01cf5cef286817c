// What became of each webhook of a batch: one small hash per batch, a field per webhook-id, read
// by the batch's status (API, library, `vqb status`). Written when the event is emitted (pending)
// and after every attempt; a delivery is one job, so its attempts never write at once.

import type { VqbKeys } from '../../queue/keys.js';
import type { RedisClient } from '../../queue/redis.js';
import type { WebhookEventType } from './events.js';

export type DeliveryState = 'pending' | 'retrying' | 'delivered' | 'failed';

export interface DeliveryRecord {
  /** The webhook-id: the same on every attempt. */
  id: string;
  event: WebhookEventType;
  url: string;
  state: DeliveryState;
  attempts: number;
  /** HTTP status of the last attempt, when the receiver answered. */
  lastStatus?: number;
  /** Why the last attempt failed, when it did. */
  lastError?: string;
  lastAttemptAt?: number;
  deliveredAt?: number;
  createdAt: number;
}

export class DeliveryLog {
  readonly #redis: RedisClient;
  readonly #keys: VqbKeys;

  constructor(redis: RedisClient, keys: VqbKeys) {
    this.#redis = redis;
    this.#keys = keys;
  }

  /** Notes a new delivery unless it is known (a second emit of the same event changes nothing). */
  async emitted(batchId: string, record: DeliveryRecord): Promise<void> {
    await this.#redis.hsetnx(this.#keys.batchWebhooks(batchId), record.id, JSON.stringify(record));
  }

  async update(batchId: string, record: DeliveryRecord): Promise<void> {
    await this.#redis.hset(this.#keys.batchWebhooks(batchId), record.id, JSON.stringify(record));
  }

  async get(batchId: string, id: string): Promise<DeliveryRecord | undefined> {
    const raw = await this.#redis.hget(this.#keys.batchWebhooks(batchId), id);
    return raw ? (JSON.parse(raw) as DeliveryRecord) : undefined;
  }

  /** The batch's deliveries, oldest first. */
  async list(batchId: string): Promise<DeliveryRecord[]> {
    const all = Object.values(await this.#redis.hgetall(this.#keys.batchWebhooks(batchId))).map(
      (raw) => JSON.parse(raw) as DeliveryRecord,
    );
    return all.sort((a, b) => a.createdAt - b.createdAt || a.id.localeCompare(b.id));
  }

  /** Deletes the batch's delivery records (retention, once they are in its archive's manifest). */
  async forget(batchId: string): Promise<void> {
    await this.#redis.del(this.#keys.batchWebhooks(batchId));
  }
}

// What became of each webhook of a batch: one small hash per batch, a field per webhook-id, read
// by the batch's status (API, library, `vqb status`). Written when the event is emitted (pending)
// and after every attempt; a delivery is one job, so its attempts never write at once. Each attempt
// is also published, for whoever waits on it (`vqb run --notify`: a wait is a message).

import type { Clock } from '../clock.js';
import type { RedisClient } from '../redis/connection.js';
import { type Heard, hear } from '../redis/heard.js';
import type { BatchKey, BatchRef, VqbKeys } from '../redis/keys.js';
import { DELIVERY_FAILURES, type DeliveryFailure } from '../schemas/batch.js';
import type { WebhookEventType } from './events.js';

export type DeliveryState = 'pending' | 'retrying' | 'delivered' | 'failed';

export { DELIVERY_FAILURES, type DeliveryFailure } from '../schemas/batch.js';

/** A stored lastError as a category: records written before categories (socket words) read as `failed`. */
export function deliveryFailure(raw: string): DeliveryFailure {
  return Object.hasOwn(DELIVERY_FAILURES, raw) ? (raw as DeliveryFailure) : 'failed';
}

/** A stored lastError for a person: the category and its sentence (`timeout (no answer within …)`). */
export function failureText(raw: string): string {
  const failure = deliveryFailure(raw);
  return `${failure} (${DELIVERY_FAILURES[failure]})`;
}

export interface DeliveryRecord {
  /** The webhook-id: the same on every attempt. */
  id: string;
  event: WebhookEventType;
  url: string;
  state: DeliveryState;
  attempts: number;
  /** HTTP status of the last attempt, when the receiver answered. */
  lastStatus?: number;
  /** Why the last attempt failed, when it did: a DeliveryFailure (older records: words, read as `failed`). */
  lastError?: string;
  lastAttemptAt?: number;
  deliveredAt?: number;
  createdAt: number;
}

/** Finds a batch's account, whose slot holds its keys (BatchStore.find). */
export type FindBatch = (batch: BatchKey) => Promise<BatchRef | undefined>;

export class DeliveryLog {
  readonly #redis: RedisClient;
  readonly #keys: VqbKeys;
  readonly #find: FindBatch;

  constructor(redis: RedisClient, keys: VqbKeys, find: FindBatch) {
    this.#redis = redis;
    this.#keys = keys;
    this.#find = find;
  }

  /** The batch's delivery hash; a batch that no longer exists has none (its id is all a webhook job holds). */
  async #key(batch: BatchKey): Promise<string | undefined> {
    const ref = await this.#find(batch);
    return ref ? this.#keys.batchWebhooks(ref) : undefined;
  }

  /**
   * The batch's delivery attempts, heard as they are recorded, for as long as someone waits on
   * them (close it after); undefined for a batch that no longer exists.
   */
  async attempts(batch: BatchKey, time: Pick<Clock, 'sleep'>): Promise<Heard | undefined> {
    const ref = await this.#find(batch);
    return ref ? hear(this.#redis, this.#keys.batchWebhooksChanged(ref), time) : undefined;
  }

  /** Notes a new delivery unless it is known (a second emit of the same event changes nothing). */
  async emitted(batch: BatchKey, record: DeliveryRecord): Promise<void> {
    const key = await this.#key(batch);
    if (key) await this.#redis.hsetnx(key, record.id, JSON.stringify(record));
  }

  async update(batch: BatchKey, record: DeliveryRecord): Promise<void> {
    const ref = await this.#find(batch);
    if (!ref) return;
    await this.#redis.hset(this.#keys.batchWebhooks(ref), record.id, JSON.stringify(record));
    await this.#redis.publish(this.#keys.batchWebhooksChanged(ref), record.id);
  }

  async get(batch: BatchKey, id: string): Promise<DeliveryRecord | undefined> {
    const key = await this.#key(batch);
    const raw = key ? await this.#redis.hget(key, id) : null;
    return raw ? (JSON.parse(raw) as DeliveryRecord) : undefined;
  }

  /** The batch's deliveries, oldest first. */
  async list(batch: BatchKey): Promise<DeliveryRecord[]> {
    const key = await this.#key(batch);
    if (!key) return [];
    const all = Object.values(await this.#redis.hgetall(key)).map((raw) => JSON.parse(raw) as DeliveryRecord);
    return all.sort((a, b) => a.createdAt - b.createdAt || a.id.localeCompare(b.id));
  }

  /** Deletes the batch's delivery records (retention, once they are in its archive's manifest). */
  async forget(batch: BatchRef): Promise<void> {
    await this.#redis.del(this.#keys.batchWebhooks(batch));
  }
}

// Terminal outcomes, one per (batch, plate), stored before the job is marked finished so that a
// paid result survives any crash after it arrived. Recording is one Lua script: the outcome is
// written only if none exists, and in the same step the batch counts move and the batch is marked
// finished when its last plate lands. Counts therefore stay exact with any number of workers,
// retries and restarts.
import type { RedisClient } from '../redis.js';
import type { VqbKeys } from '../keys.js';
import { type Scripted, withScripts } from '../scripts.js';
import type { Outcome } from '../types.js';

export type RecordResult = 'recorded' | 'exists' | 'batch-finished';

export class OutcomeStore {
  readonly #redis: Scripted<'batch-record'>;
  readonly #keys: VqbKeys;

  constructor(redis: RedisClient, keys: VqbKeys) {
    this.#redis = withScripts(redis, ['batch-record']);
    this.#keys = keys;
  }

  /** Stores the outcome unless one exists. */
  async record(outcome: Outcome): Promise<RecordResult> {
    const result = Number(
      await this.#redis.vqbBatchRecord(
        this.#keys.outcomes(outcome.batchId),
        this.#keys.batch(outcome.batchId),
        outcome.plate,
        JSON.stringify(outcome),
        outcome.status,
        String(outcome.finishedAt),
        outcome.possibleDuplicate ? '1' : '0',
      ),
    );
    return result === 0 ? 'exists' : result === 2 ? 'batch-finished' : 'recorded';
  }

  async get(batchId: string, plate: string): Promise<Outcome | undefined> {
    const raw = await this.#redis.hget(this.#keys.outcomes(batchId), plate);
    return raw ? (JSON.parse(raw) as Outcome) : undefined;
  }

  async has(batchId: string, plate: string): Promise<boolean> {
    return (await this.#redis.hexists(this.#keys.outcomes(batchId), plate)) === 1;
  }

  /** Many at once, in the order asked (undefined where none is stored yet). */
  async getMany(batchId: string, plates: readonly string[]): Promise<(Outcome | undefined)[]> {
    if (plates.length === 0) return [];
    const raws = await this.#redis.hmget(this.#keys.outcomes(batchId), ...plates);
    return raws.map((raw: string | null) => (raw ? (JSON.parse(raw) as Outcome) : undefined));
  }

  /** Every stored outcome of a batch, streamed with HSCAN (bounded memory). */
  async *scan(batchId: string): AsyncIterable<Outcome> {
    let cursor = '0';
    do {
      const [next, flat] = await this.#redis.hscan(this.#keys.outcomes(batchId), cursor, 'COUNT', 500);
      cursor = next;
      for (let i = 1; i < flat.length; i += 2) yield JSON.parse(flat[i]!) as Outcome;
    } while (cursor !== '0');
  }

  /** Removes failed outcomes so that `retry` can run those plates again; returns the removed ones. */
  async removeFailed(batchId: string, plates: readonly string[]): Promise<number> {
    if (plates.length === 0) return 0;
    const key = this.#keys.batch(batchId);
    const removed = await this.#redis.hdel(this.#keys.outcomes(batchId), ...plates);
    if (removed > 0) {
      await this.#redis.multi().hincrby(key, 'failed', -removed).hdel(key, 'finishedAt').exec();
    }
    return removed;
  }

  /** Deletes every stored outcome of the batch (retention, after its archive was verified). */
  async forget(batchId: string): Promise<void> {
    await this.#redis.del(this.#keys.outcomes(batchId));
  }
}

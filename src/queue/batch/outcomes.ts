// Terminal outcomes, one per (batch, plate), stored before the job is marked finished so that a
// paid result survives any crash after it arrived. Recording is one Lua script: the outcome is
// written only if none exists, and in the same step the batch counts move and the batch is marked
// finished when its last plate lands. Counts therefore stay exact with any number of workers,
// retries and restarts.
//
// An outcome is stored packed (src/redis/compact.ts: deflated JSON, about 150 bytes instead of 590)
// and without the batch id and the plate, which its key and field already say. Outcomes stored
// as plain JSON before that are read as they were (the format byte tells them apart).
import { pack, unpack } from '../../redis/compact.js';
import type { RedisClient } from '../../redis/connection.js';
import type { BatchRef, VqbKeys } from '../../redis/keys.js';
import { type Scripted, withScripts } from '../../redis/scripts.js';
import type { Outcome } from '../types.js';

export type RecordResult = 'recorded' | 'exists' | 'batch-finished';

/** The stored form: the outcome less what its key (the batch) and its field (the plate) say. */
export function encodeOutcome(outcome: Outcome): Buffer {
  const { batchId: _batch, plate: _plate, ...rest } = outcome;
  return pack(rest);
}

export function decodeOutcome(batchId: string, plate: string, raw: Buffer): Outcome {
  // Old plain-JSON outcomes hold both already; spreading them after keeps what was stored.
  return { batchId, plate, ...(unpack(raw) as Omit<Outcome, 'batchId' | 'plate'>) };
}

/** The reply of the outcome's rule: 0 an outcome existed, 1 recorded, 2 recorded and the batch finished. */
export function recordResult(reply: unknown): RecordResult {
  const result = Number(reply);
  return result === 0 ? 'exists' : result === 2 ? 'batch-finished' : 'recorded';
}

export class OutcomeStore {
  readonly #redis: Scripted<'batch-record'>;
  readonly #keys: VqbKeys;

  constructor(redis: RedisClient, keys: VqbKeys) {
    this.#redis = withScripts(redis, ['batch-record']);
    this.#keys = keys;
  }

  /** Stores the outcome unless one exists. */
  async record(account: string, outcome: Outcome): Promise<RecordResult> {
    const { keys, args } = this.terms(account, outcome, encodeOutcome(outcome));
    return recordResult(await this.#redis.vqbBatchRecord(...keys, ...args));
  }

  /**
   * What the outcome's rule (lua/includes/outcome-record.lua) needs: for batch-record and for a
   * plate's one settling script (queue/plate-settle.ts). `packed` is encodeOutcome(outcome), made
   * once so that a retried call sends the very same bytes.
   */
  terms(account: string, outcome: Outcome, packed: Buffer): { keys: string[]; args: (string | Buffer)[] } {
    const batch = { id: outcome.batchId, account };
    return {
      keys: [this.#keys.outcomes(batch), this.#keys.batch(batch)],
      args: [outcome.plate, packed, outcome.status, String(outcome.finishedAt), outcome.possibleDuplicate ? '1' : '0'],
    };
  }

  /** What "the plate has its outcome" needs, for a script that looks before it takes anything (create-admit). */
  existsTerms(batch: BatchRef, plate: string): { keys: string[]; args: string[] } {
    return { keys: [this.#keys.outcomes(batch)], args: [plate] };
  }

  async get(batch: BatchRef, plate: string): Promise<Outcome | undefined> {
    const raw = await this.#redis.hgetBuffer(this.#keys.outcomes(batch), plate);
    return raw ? decodeOutcome(batch.id, plate, raw) : undefined;
  }

  async has(batch: BatchRef, plate: string): Promise<boolean> {
    return (await this.#redis.hexists(this.#keys.outcomes(batch), plate)) === 1;
  }

  /** Many at once, in the order asked (undefined where none is stored yet). */
  async getMany(batch: BatchRef, plates: readonly string[]): Promise<(Outcome | undefined)[]> {
    if (plates.length === 0) return [];
    const raws = await this.#redis.hmgetBuffer(this.#keys.outcomes(batch), ...plates);
    return raws.map((raw: Buffer | null, i: number) => (raw ? decodeOutcome(batch.id, plates[i]!, raw) : undefined));
  }

  /** Every stored outcome of a batch, streamed with HSCAN (bounded memory). */
  async *scan(batch: BatchRef): AsyncIterable<Outcome> {
    let cursor = '0';
    do {
      const [next, flat] = await this.#redis.hscanBuffer(this.#keys.outcomes(batch), cursor, 'COUNT', 500);
      cursor = next.toString();
      for (let i = 1; i < flat.length; i += 2) yield decodeOutcome(batch.id, flat[i - 1]!.toString(), flat[i]!);
    } while (cursor !== '0');
  }

  /** Removes failed outcomes so that `retry` can run those plates again; returns the removed ones. */
  async removeFailed(batch: BatchRef, plates: readonly string[]): Promise<number> {
    if (plates.length === 0) return 0;
    const key = this.#keys.batch(batch);
    const removed = await this.#redis.hdel(this.#keys.outcomes(batch), ...plates);
    if (removed > 0) {
      await this.#redis.multi().hincrby(key, 'failed', -removed).hdel(key, 'finishedAt').exec();
    }
    return removed;
  }

  /** Deletes every stored outcome of the batch (retention, after its archive was verified). */
  async forget(batch: BatchRef): Promise<void> {
    await this.#redis.del(this.#keys.outcomes(batch));
  }
}

// Terminal outcomes, one per (batch, plate), stored before the job is marked finished so that a
// paid result survives any crash after it arrived. Recording is one Lua script: the outcome is
// written only if none exists, and in the same step the batch counts move, the in-flight slot is
// freed and the batch is marked finished when its last plate lands. Counts therefore stay exact
// with any number of workers, retries and restarts.
import type { Redis } from 'ioredis';
import type { VqbKeys } from './redis.js';
import type { Outcome } from './types.js';

const RECORD = `
if redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2]) == 0 then return 0 end
redis.call('HINCRBY', KEYS[2], ARGV[3], 1)
if ARGV[6] == '1' then redis.call('HINCRBY', KEYS[2], 'possibleDuplicates', 1) end
if redis.call('ZREM', KEYS[3], ARGV[4]) == 1 then redis.call('HINCRBY', KEYS[2], 'inflight', -1) end
local b = redis.call('HMGET', KEYS[2], 'enqueued', 'done', 'failed', 'sealed', 'finishedAt')
if b[4] == '1' and not b[5] and (tonumber(b[2] or '0') + tonumber(b[3] or '0')) >= tonumber(b[1] or '0') then
  redis.call('HSET', KEYS[2], 'finishedAt', ARGV[5])
  return 2
end
return 1
`;

export type RecordResult = 'recorded' | 'exists' | 'batch-finished';

export class OutcomeStore {
  readonly #redis: Redis;
  readonly #keys: VqbKeys;

  constructor(redis: Redis, keys: VqbKeys) {
    this.#redis = redis;
    this.#keys = keys;
    redis.defineCommand('vqbRecordOutcome', { numberOfKeys: 3, lua: RECORD });
  }

  /** Stores the outcome unless one exists; `jobId` is the in-flight member to release. */
  async record(outcome: Outcome, jobId: string): Promise<RecordResult> {
    const result = (await (this.#redis as unknown as RecordCommand).vqbRecordOutcome(
      this.#keys.outcomes(outcome.batchId),
      this.#keys.batch(outcome.batchId),
      this.#keys.inflight,
      outcome.plate,
      JSON.stringify(outcome),
      outcome.status,
      jobId,
      String(outcome.finishedAt),
      outcome.possibleDuplicate ? '1' : '0',
    )) as number;
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
    return raws.map((raw) => (raw ? (JSON.parse(raw) as Outcome) : undefined));
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
}

interface RecordCommand {
  vqbRecordOutcome(...args: string[]): Promise<unknown>;
}

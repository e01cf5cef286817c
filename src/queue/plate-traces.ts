// Where a plate's trace context waits while the plate waits in the scheduler (tracing on only:
// docs/operations.md, "Tracing"). The scheduler's lists stay plates alone; beside them, one hash
// per batch maps a plate to its `traceparent` and the time it was stored, written at ingest and
// read by the feed that makes the plate a job. It expires on its own: a trace is a help, not a record.
import type { RedisClient } from '../redis/connection.js';
import type { BatchRef, VqbKeys } from '../redis/keys.js';

/** How long a plate's trace context is kept for its wait (a week: longer waits start a trace of their own). */
const KEPT_MS = 7 * 24 * 3_600_000;

export interface CarriedTrace {
  traceparent: string;
  /** Epoch ms when the plate was stored in the scheduler. */
  since: number;
}

export class PlateTraces {
  readonly #redis: RedisClient;
  readonly #keys: VqbKeys;

  constructor(redis: RedisClient, keys: VqbKeys) {
    this.#redis = redis;
    this.#keys = keys;
  }

  async keep(batch: BatchRef, carried: ReadonlyMap<string, string>, since: number): Promise<void> {
    if (carried.size === 0) return;
    const key = this.#keys.plateTraces(batch);
    const fields = [...carried].flatMap(([plate, traceparent]) => [plate, `${traceparent} ${since}`]);
    await this.#redis
      .multi()
      .hset(key, ...fields)
      .pexpire(key, KEPT_MS)
      .exec();
  }

  /** Each plate's carried trace, read and forgotten in one step. */
  async take(batch: BatchRef, plates: readonly string[]): Promise<Map<string, CarriedTrace>> {
    const out = new Map<string, CarriedTrace>();
    if (plates.length === 0) return out;
    const key = this.#keys.plateTraces(batch);
    const [read] =
      (await this.#redis
        .multi()
        .hmget(key, ...plates)
        .hdel(key, ...plates)
        .exec()) ?? [];
    const values = (read?.[1] ?? []) as (string | null)[];
    plates.forEach((plate, i) => {
      const [traceparent, since] = values[i]?.split(' ') ?? [];
      if (traceparent && since) out.set(plate, { traceparent, since: Number(since) });
    });
    return out;
  }
}

// Results kept per normalised plate so that a later batch may answer from them instead of paying
// again (opt-in per batch with a window such as 24h). Each entry expires after VQ_REUSE_KEEP.
import type { RedisClient } from './redis.js';
import type { VqbKeys } from './keys.js';

export interface StoredResult {
  queryId?: string;
  result: unknown;
  /** Epoch ms the result was stored (its age is measured from here). */
  at: number;
}

export class ReuseStore {
  readonly #redis: RedisClient;
  readonly #keys: VqbKeys;
  readonly #keepMs: number;

  constructor(redis: RedisClient, keys: VqbKeys, keepMs: number) {
    this.#redis = redis;
    this.#keys = keys;
    this.#keepMs = keepMs;
  }

  get enabled(): boolean {
    return this.#keepMs > 0;
  }

  async save(plate: string, entry: StoredResult): Promise<void> {
    if (!this.enabled) return;
    await this.#redis.set(this.#keys.reuse(plate), JSON.stringify(entry), 'PX', this.#keepMs);
  }

  /** The stored result if it is at most `withinMs` old. */
  async find(plate: string, withinMs: number, now: number): Promise<(StoredResult & { ageMs: number }) | undefined> {
    if (withinMs <= 0) return undefined;
    const raw = await this.#redis.get(this.#keys.reuse(plate));
    if (!raw) return undefined;
    const entry = JSON.parse(raw) as StoredResult;
    const ageMs = now - entry.at;
    return ageMs <= withinMs ? { ...entry, ageMs } : undefined;
  }

  /** How many of these plates have a result within the window (for dry runs). */
  async countFresh(plates: readonly string[], withinMs: number, now: number): Promise<number> {
    if (withinMs <= 0 || plates.length === 0) return 0;
    const raws = await this.#redis.mget(...plates.map((p) => this.#keys.reuse(p)));
    return raws.filter((raw) => raw !== null && now - (JSON.parse(raw) as StoredResult).at <= withinMs).length;
  }
}

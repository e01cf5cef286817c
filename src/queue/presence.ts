// Which worker processes are alive, so a command that queues work (`vqb retry`, a rerun) can say
// when nothing will take it. Each `vqb work` / `vqb serve --workers` process writes its name and
// the time into one sorted set every BEAT_MS; a process that has not written for STALE_MS is gone
// (a crash leaves its entry, which simply ages out). One ZADD per process every 10 s: idle cost is
// nil beside the pacing. Owner of `keys.workers`.

import { hostname } from 'node:os';
import { clock } from '../clock.js';
import type { RedisClient } from '../redis/connection.js';
import type { VqbKeys } from '../redis/keys.js';

export const BEAT_MS = 10_000;
export const STALE_MS = 3 * BEAT_MS;

export class WorkerPresence {
  readonly #redis: RedisClient;
  readonly #key: string;
  readonly #now: () => number;
  readonly host = hostname();
  /** `host:pid@startedAt`: the queue dashboard says since when a process works (issue 36, 13). */
  readonly name: string;

  constructor(redis: RedisClient, keys: VqbKeys, now: () => number = clock.now) {
    this.#redis = redis;
    this.#key = keys.workers;
    this.#now = now;
    this.name = `${this.host}:${process.pid}@${now()}`;
  }

  /** This process is alive now; entries gone stale are dropped on the way. */
  async beat(): Promise<void> {
    const now = this.#now();
    await this.#redis
      .multi()
      .zadd(this.#key, now, this.name)
      .zremrangebyscore(this.#key, '-inf', now - STALE_MS)
      .exec();
  }

  /** Beats now and every BEAT_MS until the returned stop is called (which takes this process out). */
  start(onError: (err: unknown) => void): () => Promise<void> {
    const beat = () => void this.beat().catch(onError);
    beat();
    const timer = clock.setInterval(beat, BEAT_MS);
    timer.unref();
    return async () => {
      clock.clearTimeout(timer);
      await this.#redis.zrem(this.#key, this.name).catch(() => undefined);
    };
  }

  /** Worker processes heard from within STALE_MS. */
  async alive(): Promise<number> {
    return this.#redis.zcount(this.#key, this.#now() - STALE_MS, '+inf');
  }

  /** The worker processes heard from within STALE_MS: name, since when, last heard (epoch ms). */
  async list(): Promise<WorkerProcess[]> {
    const flat = await this.#redis.zrangebyscore(this.#key, this.#now() - STALE_MS, '+inf', 'WITHSCORES');
    const found: WorkerProcess[] = [];
    for (let i = 0; i + 1 < flat.length; i += 2) {
      const member = flat[i]!;
      // A process of an older vqb wrote `host:pid` alone: since when is unknown.
      const at = member.lastIndexOf('@');
      const startedAt = at === -1 ? undefined : Number(member.slice(at + 1));
      found.push({
        name: at === -1 ? member : member.slice(0, at),
        ...(startedAt !== undefined && Number.isFinite(startedAt) ? { startedAt } : {}),
        lastBeatAt: Number(flat[i + 1]),
      });
    }
    return found;
  }
}

export interface WorkerProcess {
  /** `host:pid`. */
  name: string;
  startedAt?: number;
  lastBeatAt: number;
}

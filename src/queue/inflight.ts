// The cap on queries created upstream and not yet finished, per account, shared by every worker.
// Holding the pipeline short keeps results flowing early in a large batch and bounds what a quota
// stop strands. A slot is taken just before a create and given back when the plate's outcome is
// stored or when the create did not happen. This module alone reads and writes the in-flight sets.

import type { RedisClient } from '../redis/connection.js';
import type { VqbKeys } from '../redis/keys.js';
import { type Scripted, withScripts } from '../redis/scripts.js';

const SCRIPTS = ['inflight-acquire', 'inflight-release'] as const;

export class InFlight {
  readonly #redis: Scripted<(typeof SCRIPTS)[number]>;
  readonly #keys: VqbKeys;
  readonly #cap: number;
  readonly #jobPrefix: (accountId: string) => string;

  /** `jobPrefix` turns an account's job id into its BullMQ key (src/engine/bullmq/keys.ts jobKeyPrefix). */
  constructor(redis: RedisClient, keys: VqbKeys, cap: number, jobPrefix: (accountId: string) => string) {
    this.#redis = withScripts(redis, SCRIPTS);
    this.#keys = keys;
    this.#cap = cap;
    this.#jobPrefix = jobPrefix;
  }

  /** True when the job holds (or already held) a slot; false when the account's cap is reached. */
  async acquire(accountId: string, jobId: string, batchId: string, now: number): Promise<boolean> {
    const { keys, args } = this.terms(accountId, jobId, batchId, now);
    return Number(await this.#redis.vqbInflightAcquire(...keys, ...args)) === 1;
  }

  /**
   * What the cap's rule (lua/includes/inflight-take.lua) needs for one create: for
   * inflight-acquire and for the create's one admission script (queue/admission.ts). `cap`: a
   * lower cap for this create (1 while the account meets its upstream: workers/flow.ts).
   */
  terms(
    accountId: string,
    jobId: string,
    batchId: string,
    now: number,
    cap = this.#cap,
  ): { keys: string[]; args: (string | number)[] } {
    return {
      keys: [this.#keys.inflight(accountId), this.#keys.inflightByBatch(accountId)],
      args: [jobId, batchId, Math.min(cap, this.#cap), now, this.#jobPrefix(accountId)],
    };
  }

  async release(accountId: string, jobId: string, batchId: string): Promise<void> {
    const { keys, args } = this.releaseTerms(accountId, jobId, batchId);
    await this.#redis.vqbInflightRelease(...keys, ...args);
  }

  /** What giving a slot back (lua/includes/inflight-release.lua) needs: for inflight-release and plate-settle. */
  releaseTerms(accountId: string, jobId: string, batchId: string): { keys: string[]; args: string[] } {
    return { keys: [this.#keys.inflight(accountId), this.#keys.inflightByBatch(accountId)], args: [jobId, batchId] };
  }

  /**
   * What the feeder reads to leave creates off the queue while the cap is reached (they would
   * only be refused and go round again): the account's in-flight set and the cap.
   */
  capOf(accountId: string): { key: string; cap: number } {
    return { key: this.#keys.inflight(accountId), cap: this.#cap };
  }

  async count(accountId: string): Promise<number> {
    return this.#redis.zcard(this.#keys.inflight(accountId));
  }

  /** Queries of the batch created and not finished. */
  async forBatch(accountId: string, batchId: string): Promise<number> {
    return Number((await this.#redis.hget(this.#keys.inflightByBatch(accountId), batchId)) ?? 0);
  }

  /** Removes the batch's slot count and any slot still listed for its jobs (retention). */
  async forget(accountId: string, batchId: string): Promise<void> {
    const mine = (await this.#redis.zrange(this.#keys.inflight(accountId), 0, '-1')).filter((m: string) =>
      m.startsWith(`${batchId}.`),
    );
    const multi = this.#redis.multi().hdel(this.#keys.inflightByBatch(accountId), batchId);
    if (mine.length > 0) multi.zrem(this.#keys.inflight(accountId), ...mine);
    await multi.exec();
  }
}

// Where a plate's work is written down: its terminal outcome (before the job completes, so a paid
// result survives any crash after it arrived) with the in-flight slot it gives back and the count
// of the answer that ended it (one script), the cost counters, the reuse store, the metrics. The
// processor calls this and nothing below it.

import type { Job } from 'bullmq';
import { type Clock, clockWith } from '../src/clock.js';
import { noMetrics, type WorkerMetrics } from '../src/metrics.js';
import type { OutcomeStore, RecordResult } from '../src/queue/batch/outcomes.js';
import type { BatchStore } from '../src/queue/batch/store.js';
import type { CostCount, CostField, CostLedger } from '../src/queue/costs.js';
import type { InFlight } from '../src/queue/inflight.js';
import type { PlateSettle } from '../src/queue/plate-settle.js';
import type { PointerTerms, ReuseStore, StoredResult } from '../src/queue/reuse.js';
import { batchOf, keyOf, type Outcome, type OutcomeError, type PlateJobData } from '../src/queue/types.js';
import { isRedisDown, isRedisFull, type RedisHealth } from '../src/redis/health.js';
import type { BatchRef } from '../src/redis/keys.js';
import type { ReplicaAck } from '../src/redis/replica-ack.js';
import { SPAN, spanned } from '../src/telemetry/index.js';
import { jobAttributes } from './job-attributes.js';

export interface RecorderDeps {
  outcomes: OutcomeStore;
  /** The outcome, the in-flight slot given back and the last answer's count, in one step. */
  settle: PlateSettle;
  batches: BatchStore;
  inflight: InFlight;
  costs: CostLedger;
  reuse: ReuseStore;
  metrics?: WorkerMetrics;
  now?: () => number;
  /** The worker's clock (services.ts): its waits for Redis sleep on it. */
  clock?: Clock;
  /** Told once per finish, by the process whose outcome finished the batch (it emits batch.finished). */
  onBatchFinished?: (batch: BatchRef) => Promise<void>;
  /** Told when storing waits for Redis (one log line per change of state, not per retry). */
  health?: RedisHealth;
  /**
   * Confirms paid writes with the replicas (redis/replica-ack.ts), on the connection `settle`
   * writes on; absent or 0 replicas: a primary's answer is enough.
   */
  replicas?: ReplicaAck;
  /** Waits between attempts to store an outcome while Redis is down or full (default 250 ms doubling to 5 s). */
  storeBackoffMs?: { first: number; max: number };
}

const STORE_BACKOFF = { first: 250, max: 5_000 };

type Stores = Pick<RecorderDeps, 'outcomes' | 'settle' | 'batches' | 'inflight' | 'costs' | 'reuse'>;

/** The stores a recorder writes to, as the process's services hold them (src/services.ts). */
export function storesOf(services: Stores): Stores {
  const { outcomes, settle, batches, inflight, costs, reuse } = services;
  return { outcomes, settle, batches, inflight, costs, reuse };
}

type PlateJob = Job<PlateJobData, unknown, string>;

/**
 * Something paid for that only this process holds while Redis does not take it: a plate's
 * outcome, or the query id a create returned. A stop that cannot wait for Redis any longer writes
 * these to a file (workers/worker.ts `closeWithin`) instead of dropping them.
 */
export interface HeldPaid {
  kind: 'outcome' | 'queryId';
  account: string;
  batchId: string;
  plate: string;
  queryId?: string;
  outcome?: Outcome;
  /** When Redis first refused it (ms). */
  since: number;
}

export class Recorder {
  readonly #d: RecorderDeps;
  readonly #now: () => number;
  readonly #clock: Clock;
  readonly #metrics: WorkerMetrics;
  /** Per-batch reuse windows, read at most once a second per process. */
  readonly #reuseWindows = new Map<string, { at: number; ms: number }>();
  /** What waits for Redis right now (see HeldPaid). */
  readonly #held = new Set<HeldPaid>();

  constructor(deps: RecorderDeps) {
    this.#d = deps;
    this.#clock = deps.clock ?? clockWith(deps.now);
    this.#now = deps.now ?? (() => this.#clock.now());
    this.#metrics = deps.metrics ?? noMetrics;
  }

  /** The plate already has an outcome (a resumed batch, a job added again): give back its slot. */
  async finishedBefore(job: PlateJob): Promise<boolean> {
    const { account, batchId, plate } = job.data;
    if (!(await this.#d.outcomes.has({ id: batchId, account }, plate))) return false;
    await this.#d.inflight.release(account, job.id!, batchId);
    return true;
  }

  count(batch: BatchRef, ...fields: CostField[]): Promise<void> {
    return this.#d.costs.count(batch, ...fields);
  }

  /** What an answer's headers said of its price, added to the batch's reported sums (queue/costs.ts). */
  reported(batch: BatchRef, billing: Parameters<CostLedger['report']>[1]): Promise<void> {
    return this.#d.costs.report(batch, billing);
  }

  /** The same count, handed to a job-fence write that runs anyway. */
  counting(batch: BatchRef, ...fields: CostField[]): CostCount {
    return this.#d.costs.counting(batch, ...fields);
  }

  /** A stored result recent enough for the batch's reuse window, if the batch allows reuse. */
  async reusable(data: PlateJobData): Promise<(StoredResult & { ageMs: number }) | undefined> {
    const now = this.#now();
    return this.#d.reuse.find(data.account, data.plate, await this.#reuseWindow(data, now), now);
  }

  async #reuseWindow(data: Pick<PlateJobData, 'batchId' | 'account'>, now: number): Promise<number> {
    const key = `${data.account}/${data.batchId}`;
    let window = this.#reuseWindows.get(key);
    if (!window || now - window.at >= 1_000) {
      window = { at: now, ms: await this.#d.batches.reuseWindow(batchOf(data)) };
      this.#reuseWindows.set(key, window);
    }
    return window.ms;
  }

  /**
   * Stores the outcome, waiting for Redis as long as it takes: the result is paid for and held
   * only here, so it is never dropped and the plate is never created again. While Redis is down
   * or full the account's line waits (reason redis_down / redis_full, in the waits metric); the
   * job's lock may lapse meanwhile, and a second worker that takes the job over finds the
   * outcome stored (HSETNX) or the query id in the job and polls instead of creating.
   */
  #store(
    jobId: string,
    account: string,
    key: string,
    outcome: Outcome,
    count: CostField[],
    pointer: PointerTerms | undefined,
  ): Promise<RecordResult> {
    const held = {
      kind: 'outcome' as const,
      batchId: outcome.batchId,
      plate: outcome.plate,
      ...(outcome.queryId ? { queryId: outcome.queryId } : {}),
      outcome,
    };
    const settle = this.#d.settle.prepare({
      outcome,
      account,
      key,
      jobId,
      count: this.#d.costs.counting({ id: outcome.batchId, account }, ...count),
      // A reused result is counted as reused only when it became the plate's outcome.
      ...(outcome.reused ? { countIfStored: 'reused' } : {}),
      ...(pointer ? { pointer } : {}),
    });
    // A settle made again finds its own outcome stored ('exists'): the first answer stands.
    return this.untilStored(account, settle, held, (again) => again === 'exists');
  }

  /** Paid things waiting for Redis in this process now. */
  held(): HeldPaid[] {
    return [...this.#held];
  }

  /**
   * Runs a write that holds something paid for (an outcome, the query id a create returned)
   * until Redis takes it, waiting out an outage or a full Redis with backoff. Other errors throw.
   *
   * With `sameAgain` the write is also confirmed by the replicas when the deployment asks for it
   * (VQ_REDIS_REPLICA_ACKS): one no replica holds yet is made again after the same backoff, since
   * a failover may lose it. The write must be idempotent; `sameAgain` tells an answer that only
   * found the earlier attempt's work done (its answer then stands) from one that did the work.
   */
  async untilStored<T>(
    account: string,
    write: () => Promise<T>,
    paid?: Omit<HeldPaid, 'account' | 'since'>,
    sameAgain?: (again: T) => boolean,
  ): Promise<T> {
    const backoff = this.#d.storeBackoffMs ?? STORE_BACKOFF;
    const replicas = sameAgain !== undefined && this.#d.replicas?.enabled ? this.#d.replicas : undefined;
    let wait = backoff.first;
    // Held from the first attempt: a Redis that went away may not fail the write, only queue it.
    const held: HeldPaid | undefined = paid !== undefined ? { ...paid, account, since: this.#now() } : undefined;
    if (held !== undefined) this.#held.add(held);
    let earlier: { answer: T } | undefined;
    try {
      for (;;) {
        try {
          const life = replicas?.mark() ?? 0;
          const answer = await write();
          const stored = earlier !== undefined && sameAgain!(answer) ? earlier.answer : answer;
          if (replicas) {
            earlier = { answer: stored };
            await replicas.confirm(life);
          }
          this.#d.health?.ok();
          return stored;
        } catch (err) {
          const full = isRedisFull(err);
          if (!full && !isRedisDown(err)) throw err;
          this.#d.health?.outage(err);
          this.#metrics.waited(account, full ? 'redis_full' : 'redis_down', wait);
          await this.#clock.sleep(wait);
          wait = Math.min(backoff.max, wait * 2);
        }
      }
    } finally {
      if (held !== undefined) this.#held.delete(held);
    }
  }

  /**
   * Stores the terminal outcome (unless one exists) and everything that follows from it, in one
   * step with the job's in-flight slot given back and `count` (the answer that ended the plate,
   * paid whoever stores its outcome) counted.
   */
  /** Stores the plate's outcome, in a span of its own when tracing (its status, never its result). */
  record(
    job: PlateJob,
    data: PlateJobData,
    error: OutcomeError | undefined,
    result?: unknown,
    extra: Partial<Outcome> = {},
    count: CostField[] = [],
  ): Promise<RecordResult> {
    const attributes = {
      ...jobAttributes(data),
      'vqb.plate.outcome': error ? 'failed' : 'done',
      ...(error ? { 'vqb.error.code': error.code } : {}),
      ...(error?.httpStatus !== undefined ? { 'http.response.status_code': error.httpStatus } : {}),
    };
    return spanned(SPAN.store, attributes, () => this.#record(job, data, error, result, extra, count));
  }

  async #record(
    job: PlateJob,
    data: PlateJobData,
    error: OutcomeError | undefined,
    result: unknown,
    extra: Partial<Outcome>,
    count: CostField[],
  ): Promise<RecordResult> {
    const outcome: Outcome = {
      batchId: data.batchId,
      plate: data.plate,
      status: error ? 'failed' : 'done',
      ...(data.queryId ? { queryId: data.queryId } : {}),
      ...(result !== undefined ? { result } : {}),
      ...(error ? { error } : {}),
      enqueuedAt: job.timestamp,
      ...(data.createdAt ? { createdAt: data.createdAt } : {}),
      finishedAt: this.#now(),
      requests: data.requests,
      polls: data.polls,
      attempts: job.attemptsMade + 1,
      ...(data.possibleDuplicate ? { possibleDuplicate: true } : {}),
      // The key that made the plate's requests, for the exports (a pooled batch uses several).
      ...(data.requests > 0 ? { key: keyOf(data) } : {}),
      ...extra,
    };
    // Findable by later batches: whole when reuse is on (for the deployment or this batch), else a
    // pointer to this batch's outcome (queue/reuse.ts), written with the outcome when it can be.
    const findable = outcome.status === 'done' && !outcome.reused && this.#d.reuse.enabled;
    const window = findable ? await this.#reuseWindow(data, this.#now()) : 0;
    const pointer = findable
      ? this.#d.reuse.pointerTerms(data.account, data.plate, outcome.finishedAt, data.batchId, window)
      : undefined;
    const recorded = await this.#store(job.id!, data.account, keyOf(data), outcome, count, pointer);
    if (recorded !== 'exists') {
      this.#metrics.finished(data.account, outcome);
      if (outcome.possibleDuplicate) await this.#d.costs.countDay(data.account, 'possibleDuplicates');
      if (findable && pointer === undefined) {
        await this.#d.reuse.save(
          data.account,
          data.plate,
          { ...(data.queryId ? { queryId: data.queryId } : {}), result, at: outcome.finishedAt },
          data.batchId,
          window,
        );
      }
    }
    if (recorded === 'batch-finished' && this.#d.onBatchFinished) await this.#d.onBatchFinished(batchOf(data));
    return recorded;
  }
}

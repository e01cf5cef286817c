// Prometheus metrics (prom-client). Counters that only a worker sees (requests, 429s, outcomes)
// live in the worker's process and are scraped from it; queue-wide gauges (depth by state, line
// paused, batches) are read from Redis at scrape time, so any process can serve them.
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { LimitReason } from './queue/accounts.js';
import type { QueueServices } from './queue/services.js';
import type { Outcome } from './queue/types.js';
import type { QuotaSnapshot } from './upstream/client.js';
import type { UpstreamOperation } from './upstream/errors.js';

/** What the worker reports; a no-op implementation keeps metrics optional. */
export interface WorkerMetrics {
  request(operation: UpstreamOperation, status: number): void;
  waited(reason: LimitReason | 'key', ms: number): void;
  finished(outcome: Outcome): void;
  quota(snapshot: QuotaSnapshot | undefined): void;
}

export const noMetrics: WorkerMetrics = {
  request() {},
  waited() {},
  finished() {},
  quota() {},
};

export class Metrics implements WorkerMetrics {
  readonly registry = new Registry();
  readonly #requests: Counter<'operation' | 'status'>;
  readonly #rateLimited: Counter;
  readonly #waited: Counter<'reason'>;
  readonly #finished: Counter<'status'>;
  readonly #reused: Counter;
  readonly #possibleDuplicates: Counter;
  readonly #perPlate: Histogram;
  readonly #queryDuration: Histogram;
  readonly #quota: Gauge;

  constructor(options: { defaults?: boolean } = {}) {
    if (options.defaults !== false) collectDefaultMetrics({ register: this.registry, prefix: 'vqb_process_' });
    const registers = [this.registry];
    this.#requests = new Counter({
      name: 'vqb_upstream_requests_total',
      help: 'Upstream requests by operation and HTTP status (0 = no answer)',
      labelNames: ['operation', 'status'],
      registers,
    });
    this.#rateLimited = new Counter({ name: 'vqb_upstream_rate_limited_total', help: 'Upstream answers 429 RATE_LIMIT_EXCEEDED', registers });
    this.#waited = new Counter({
      name: 'vqb_line_wait_seconds_total',
      help: 'Time every worker was told to hold, by reason (rate_limit, quota, key)',
      labelNames: ['reason'],
      registers,
    });
    this.#finished = new Counter({ name: 'vqb_plates_finished_total', help: 'Plates with a stored outcome, by status', labelNames: ['status'], registers });
    this.#reused = new Counter({ name: 'vqb_plates_reused_total', help: 'Plates answered from a stored result within the reuse window (no upstream request)', registers });
    this.#possibleDuplicates = new Counter({
      name: 'vqb_possible_duplicate_charges_total',
      help: 'Plates whose create was re-sent after its answer was lost (the upstream may have charged twice)',
      registers,
    });
    this.#perPlate = new Histogram({
      name: 'vqb_upstream_requests_per_plate',
      help: 'Upstream requests (creates + polls) spent per finished plate',
      buckets: [1, 2, 3, 4, 6, 10, 20],
      registers,
    });
    this.#queryDuration = new Histogram({
      name: 'vqb_query_duration_seconds',
      help: 'Time from the create to the stored result',
      buckets: [1, 2, 5, 10, 20, 30, 60, 120, 300],
      registers,
    });
    this.#quota = new Gauge({ name: 'vqb_upstream_quota_remaining', help: 'X-RateLimit-Remaining of the latest upstream answer', registers });
  }

  request(operation: UpstreamOperation, status: number): void {
    this.#requests.inc({ operation, status: String(status) });
    if (status === 429) this.#rateLimited.inc();
  }

  waited(reason: LimitReason | 'key', ms: number): void {
    this.#waited.inc({ reason }, ms / 1000);
  }

  finished(outcome: Outcome): void {
    this.#finished.inc({ status: outcome.status });
    if (outcome.reused) this.#reused.inc();
    if (outcome.possibleDuplicate) this.#possibleDuplicates.inc();
    this.#perPlate.observe(outcome.requests);
    if (outcome.createdAt) this.#queryDuration.observe((outcome.finishedAt - outcome.createdAt) / 1000);
  }

  quota(snapshot: QuotaSnapshot | undefined): void {
    if (snapshot?.remaining !== undefined) this.#quota.set(snapshot.remaining);
  }

  /** Queue-wide gauges, read from Redis at each scrape. */
  observeQueue(services: QueueServices): void {
    const registers = [this.registry];
    new Gauge({
      name: 'vqb_queue_jobs',
      help: 'Plate jobs by account and state (delayed = waiting for their next poll); plates not yet fed to the queue are not jobs',
      labelNames: ['account', 'state'],
      registers,
      async collect() {
        for (const [account, queue] of services.queues.entries()) {
          const counts = await queue.getJobCounts('waiting', 'prioritized', 'delayed', 'active', 'failed', 'completed');
          for (const [state, n] of Object.entries(counts)) this.set({ account, state }, Number(n));
        }
      },
    });
    new Gauge({
      name: 'vqb_queries_in_flight',
      help: 'Queries created upstream and not finished, by account',
      labelNames: ['account'],
      registers,
      async collect() {
        for (const account of services.config.accounts) this.set({ account: account.id }, await services.inflight.count(account.id));
      },
    });
    new Gauge({
      name: 'vqb_line_paused',
      help: "1 while an account's line is paused (key failure or operator) or told to wait (rate limit, quota, spending cap)",
      labelNames: ['account', 'reason'],
      registers,
      async collect() {
        for (const line of await services.lines.states()) {
          const account = line.account;
          this.set({ account, reason: 'paused' }, line.paused ? 1 : 0);
          this.set({ account, reason: 'rate_limit' }, line.limitReason === 'rate_limit' ? 1 : 0);
          this.set({ account, reason: 'quota' }, line.limitReason === 'quota' ? 1 : 0);
          this.set({ account, reason: 'budget' }, line.budgetUntil !== undefined ? 1 : 0);
        }
      },
    });
    new Gauge({
      name: 'vqb_batches',
      help: 'Batches among the newest 1000, by state',
      labelNames: ['state'],
      registers,
      async collect() {
        const { batches } = await services.batches.list(0, 1000);
        const finished = batches.filter((b) => b.finishedAt !== undefined).length;
        this.set({ state: 'finished' }, finished);
        this.set({ state: 'running' }, batches.length - finished);
      },
    });
  }
}

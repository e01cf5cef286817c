// Prometheus metrics (prom-client), served at /metrics by `vqb serve` and `vqb work --metrics-port`.
// Three groups. The process: Node.js's default metrics under their standard names. What this
// process's workers did: counters by account (requests, 429s, waits, outcomes), the upstream's
// rate-limit headers as last seen, and each account's configured limit beside them, so
// `rate(requests) / limit` needs nothing else. The state every process shares, read from Redis at
// scrape time (`observeQueue`, registered by `serve` only, so N workers do not report it N times):
// queues, lines, spending caps, batches. Answers OpenMetrics to a scraper that asks for it.

import {
  Counter,
  collectDefaultMetrics,
  Gauge,
  Histogram,
  type OpenMetricsContentType,
  openMetricsContentType,
  Registry,
} from 'prom-client';
import { type Account, isAuto, perSecond } from './accounts/account.js';
import type { RedisWaitReason, WaitedReason } from './accounts/wait.js';
import { clock } from './clock.js';
import { costOf } from './money.js';
import type { Outcome } from './queue/types.js';
import type { QueueServices } from './services.js';
import { activeTraceId } from './telemetry/index.js';
import type { QuotaSnapshot } from './upstream/client.js';
import type { UpstreamOperation } from './upstream/errors.js';

/** What the worker reports, per account; a no-op implementation keeps metrics optional. */
export interface WorkerMetrics {
  /** `answerMs`: from the request leaving to its answer, when it left. */
  request(account: string, operation: UpstreamOperation, status: number, answerMs?: number): void;
  waited(account: string, reason: WaitedReason, ms: number): void;
  finished(account: string, outcome: Outcome): void;
  quota(account: string, snapshot: QuotaSnapshot | undefined): void;
  /** One webhook delivery attempt and what became of it. */
  webhook?(event: string, result: WebhookResult): void;
  /** A worker found it no longer held a job's lock (workers/lock-loss.ts says what it did). */
  lockLost?(account: string, when: string): void;
  /** The account's rate in force (for `auto`, as learned), requests per second, and where it comes from. */
  rate?(account: string, perSecond: number, source: string): void;
}

/**
 * delivered (2xx), retry (failed, tried again later), given_up (last attempt failed), gone (410),
 * refused (host off the allow-list).
 */
export type WebhookResult = 'delivered' | 'retry' | 'given_up' | 'gone' | 'refused';

export const noMetrics: WorkerMetrics = {
  request() {},
  waited() {},
  finished() {},
  quota() {},
};

/** What the queue-wide gauges read. */
export type ObservedServices = Pick<QueueServices, 'config' | 'accounts' | 'inflight' | 'budget' | 'batchViews'>;
type LineStates = Awaited<ReturnType<ObservedServices['accounts']['states']>>;
type ListedBatches = Awaited<ReturnType<ObservedServices['batchViews']['list']>>['batches'];
interface Spending {
  account: string;
  spent: Awaited<ReturnType<ObservedServices['budget']['spent']>>;
  caps: Awaited<ReturnType<ObservedServices['budget']['caps']>>;
}

/** Unfinished batches with progress gauges: the newest this many (a label value per batch). */
export const PROGRESS_BATCHES = 50;
/** The families with a label per batch (its id): an administrator's scrape only, on `vqb serve`. */
const PER_BATCH_PREFIX = 'vqb_batch_';
/** Batches counted by `vqb_batches`: the newest this many. */
const COUNTED_BATCHES = 1_000;

// prom-client's three gauges named like counters (promtool: "non-counter metrics should not have
// _total suffix"); their by-type siblings (nodejs_active_handles{type}, …) sum to the same.
const MISNAMED_DEFAULTS = [
  'nodejs_active_handles_total',
  'nodejs_active_requests_total',
  'nodejs_active_resources_total',
];

export interface Rendered {
  contentType: string;
  body: string;
}

export class Metrics implements WorkerMetrics {
  readonly registry = new Registry();
  readonly #requests: Counter<'account' | 'operation' | 'status'>;
  readonly #rateLimited: Counter<'account'>;
  readonly #waited: Counter<'account' | 'reason'>;
  readonly #finished: Counter<'account' | 'status'>;
  readonly #reused: Counter<'account'>;
  readonly #possibleDuplicates: Counter<'account'>;
  readonly #perPlate: Histogram;
  readonly #queryDuration: Histogram;
  readonly #requestDuration: Histogram<'operation'>;
  readonly #upstreamLimit: Gauge<'account'>;
  readonly #upstreamRemaining: Gauge<'account'>;
  readonly #upstreamReset: Gauge<'account'>;
  readonly #webhooks: Counter<'event' | 'result'>;
  readonly #lockLost: Counter<'account' | 'when'>;
  readonly #rateInForce: Gauge<'account' | 'source'>;
  readonly #rateSource = new Map<string, string>();
  /** Renders OpenMetrics from the same metrics, without touching them (see `render`). */
  readonly #openMetrics = new Registry<OpenMetricsContentType>();

  constructor(options: { accounts?: readonly Pick<Account, 'id' | 'rateLimit'>[]; defaults?: boolean } = {}) {
    if (options.defaults !== false) {
      collectDefaultMetrics({ register: this.registry });
      for (const name of MISNAMED_DEFAULTS) this.registry.removeSingleMetric(name);
    }
    this.#openMetrics.setContentType(openMetricsContentType);
    const registers = [this.registry];
    this.#requests = new Counter({
      name: 'vqb_upstream_requests_total',
      help:
        'Upstream requests by account, operation and HTTP status (0 = no answer); all count ' +
        'against the account rate limit',
      labelNames: ['account', 'operation', 'status'],
      registers,
    });
    this.#rateInForce = new Gauge({
      name: 'vqb_account_rate_limit_requests_per_second',
      help:
        "The account's rate in force, in requests per second, by where it comes from: " +
        "configured (VQ_RATE_LIMIT or its rateLimit), or for auto: start, announced (the upstream's " +
        'headers), learned (429s)',
      labelNames: ['account', 'source'],
      registers,
    });
    for (const account of options.accounts ?? [])
      this.#rateInForce.set(
        { account: account.id, source: isAuto(account) ? 'start' : 'configured' },
        perSecond(account),
      );
    this.#rateLimited = new Counter({
      name: 'vqb_upstream_rate_limited_total',
      help: 'Upstream answers 429, by account',
      labelNames: ['account'],
      registers,
    });
    this.#waited = new Counter({
      name: 'vqb_line_wait_seconds_total',
      help:
        "Waits imposed on an account's line, by reason (rate_limit, quota, budget: counted in " +
        'full when decided; key: 0 per pause; redis_down, redis_full: a paid result waiting to be stored)',
      labelNames: ['account', 'reason'],
      registers,
    });
    this.#finished = new Counter({
      name: 'vqb_plates_finished_total',
      help: 'Plates with a stored outcome, by account and status',
      labelNames: ['account', 'status'],
      registers,
    });
    this.#reused = new Counter({
      name: 'vqb_plates_reused_total',
      help: 'Plates answered from a stored result within the reuse window (no upstream request)',
      labelNames: ['account'],
      registers,
    });
    this.#possibleDuplicates = new Counter({
      name: 'vqb_possible_duplicate_charges_total',
      help: 'Plates whose create was re-sent after its answer was lost (the upstream may have charged twice)',
      labelNames: ['account'],
      registers,
    });
    this.#perPlate = new Histogram({
      name: 'vqb_upstream_requests_per_plate',
      help: 'Upstream requests (creates + polls) spent per finished plate',
      buckets: [1, 2, 3, 4, 6, 10, 20],
      registers,
    });
    // The latency histograms carry exemplars: the trace id of an observation made inside a sampled
    // span (tracing on), shown to an OpenMetrics scraper only. prom-client refuses exemplars on a
    // Prometheus-text registry at construction, so these two are registered by hand.
    this.#queryDuration = new Histogram({
      name: 'vqb_query_duration_seconds',
      help: 'Time from the create to the stored result',
      buckets: [1, 2, 5, 10, 20, 30, 60, 120, 300],
      registers: [],
      enableExemplars: true,
    });
    this.#requestDuration = new Histogram({
      name: 'vqb_upstream_request_duration_seconds',
      help: 'Upstream requests from leaving to their answer, by operation (create, poll)',
      labelNames: ['operation'],
      buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers: [],
      enableExemplars: true,
    });
    for (const histogram of [this.#queryDuration, this.#requestDuration]) this.registry.registerMetric(histogram);
    const seen = 'of the latest upstream answer to this process';
    this.#upstreamLimit = new Gauge({
      name: 'vqb_upstream_ratelimit_limit',
      help: `X-RateLimit-Limit ${seen}: the upstream's own limit per window`,
      labelNames: ['account'],
      registers,
    });
    this.#upstreamRemaining = new Gauge({
      name: 'vqb_upstream_ratelimit_remaining',
      help: `X-RateLimit-Remaining ${seen}: requests left in the upstream's current window`,
      labelNames: ['account'],
      registers,
    });
    this.#upstreamReset = new Gauge({
      name: 'vqb_upstream_ratelimit_reset_timestamp_seconds',
      help: `X-RateLimit-Reset ${seen}: when the upstream's window resets, Unix seconds`,
      labelNames: ['account'],
      registers,
    });
    this.#webhooks = new Counter({
      name: 'vqb_webhook_deliveries_total',
      help: 'Webhook delivery attempts, by event and result (delivered, retry, given_up, gone, refused)',
      labelNames: ['event', 'result'],
      registers,
    });
    this.#lockLost = new Counter({
      name: 'vqb_job_lock_lost_total',
      help:
        'Jobs whose lock a worker lost (paused or cut off past VQ_LOCK_DURATION), by what it ' +
        'had done: renewal-failed, nothing-sent, answer-stored, create-superseded, answer-dropped',
      labelNames: ['account', 'when'],
      registers,
    });
  }

  rate(account: string, perSecond: number, source: string): void {
    // One series per account: the one of the source in force.
    const before = this.#rateSource.get(account);
    if (before !== undefined && before !== source) this.#rateInForce.remove({ account, source: before });
    if (before === undefined)
      for (const old of ['start', 'configured']) if (old !== source) this.#rateInForce.remove({ account, source: old });
    this.#rateSource.set(account, source);
    this.#rateInForce.set({ account, source }, perSecond);
  }

  lockLost(account: string, when: string): void {
    this.#lockLost.inc({ account, when });
  }

  webhook(event: string, result: WebhookResult): void {
    this.#webhooks.inc({ event, result });
  }

  request(account: string, operation: UpstreamOperation, status: number, answerMs?: number): void {
    this.#requests.inc({ account, operation, status: String(status) });
    if (status === 429) this.#rateLimited.inc({ account });
    if (answerMs !== undefined)
      this.#requestDuration.observe({ labels: { operation }, value: answerMs / 1000, exemplarLabels: exemplar() });
  }

  waited(account: string, reason: WaitedReason, ms: number): void {
    this.#waited.inc({ account, reason }, ms / 1000);
  }

  finished(account: string, outcome: Outcome): void {
    this.#finished.inc({ account, status: outcome.status });
    if (outcome.reused) this.#reused.inc({ account });
    if (outcome.possibleDuplicate) this.#possibleDuplicates.inc({ account });
    this.#perPlate.observe(outcome.requests);
    if (outcome.createdAt)
      this.#queryDuration.observe({
        value: (outcome.finishedAt - outcome.createdAt) / 1000,
        exemplarLabels: exemplar(),
      });
  }

  quota(account: string, snapshot: QuotaSnapshot | undefined): void {
    if (snapshot?.limit !== undefined) this.#upstreamLimit.set({ account }, snapshot.limit);
    if (snapshot?.remaining !== undefined) this.#upstreamRemaining.set({ account }, snapshot.remaining);
    if (snapshot?.resetAt !== undefined) this.#upstreamReset.set({ account }, Math.round(snapshot.resetAt / 1000));
  }

  /**
   * The exposition in the format the scraper's Accept header prefers: OpenMetrics or Prometheus
   * text. prom-client renames a registry's counters in place when it renders OpenMetrics
   * (`x_total` becomes `x` for good, breaking the next Prometheus scrape), so OpenMetrics is
   * rendered by a second registry from copies of each metric's values.
   */
  async render(accept?: string, options: { perBatch?: boolean } = {}): Promise<Rendered> {
    // The per-batch families carry batch ids as labels: left out for a scraper that may not see them.
    const families = this.registry
      .getMetricsAsArray()
      .filter((metric) => options.perBatch !== false || !metric.name.startsWith(PER_BATCH_PREFIX));
    if (!wantsOpenMetrics(accept)) {
      // Family by family: a gauge read from Redis that fails or hangs (Redis down) is left out of
      // this scrape instead of failing it, so process and upstream counters are still served.
      const names = families.map((metric) => metric.name);
      const parts = await Promise.all(names.map((name) => withinScrape(this.registry.getSingleMetricAsString(name))));
      return { contentType: this.registry.contentType, body: `${parts.filter((p) => p !== undefined).join('\n')}\n` };
    }
    // Not in prom-client's types: the one-family renderer its registries use.
    const format = this.#openMetrics as unknown as {
      getMetricsAsString(metric: { get(): Promise<unknown> }): Promise<string>;
    };
    const parts = await Promise.all(
      families.map((metric) => {
        const values = (metric as unknown as { get(): Promise<{ name: string; type: string }> }).get();
        return withinScrape(
          format.getMetricsAsString({
            get: async () => {
              const family = await values;
              return family.type === 'counter' ? { ...family, name: family.name.replace(/_total$/, '') } : family;
            },
          }),
        );
      }),
    );
    return {
      contentType: this.#openMetrics.contentType,
      body: `${parts.filter((p) => p !== undefined).join('\n')}\n# EOF\n`,
    };
  }

  /** Queue-wide gauges, read from Redis at each scrape. */
  observeQueue(services: ObservedServices, redis?: { readonly waitReason: RedisWaitReason | undefined }): void {
    const registers = [this.registry];
    const accounts = services.config.accounts.map((a) => a.id);
    // One read per scrape for the gauges that share it (a scrape starts every collect at once).
    const lines = perScrape(() => services.accounts.states());
    const batches = perScrape(async () => (await services.batchViews.list(0, COUNTED_BATCHES)).batches);
    const spending = perScrape(() =>
      Promise.all(
        accounts.map(async (account) => ({
          account,
          spent: await services.budget.spent(account),
          caps: await services.budget.caps(account),
        })),
      ),
    );
    this.#observeLines(services, { registers, accounts, lines, batches }, redis);
    this.#observeSpending(services, { registers, spending });
    this.#observeBatches({ registers, batches });
  }

  /** Each account's queue, in-flight queries and line: why it waits, until when, a pause's code. */
  #observeLines(
    services: ObservedServices,
    read: {
      registers: Registry[];
      accounts: string[];
      lines: () => Promise<LineStates>;
      batches: () => Promise<ListedBatches>;
    },
    redis?: { readonly waitReason: RedisWaitReason | undefined },
  ): void {
    const { registers, accounts, lines, batches } = read;
    new Gauge({
      name: 'vqb_queue_jobs',
      help:
        'Plate jobs by account and state (delayed = waiting for their next poll); plates not ' +
        'yet fed to the queue are not jobs',
      labelNames: ['account', 'state'],
      registers,
      async collect() {
        for (const { id: account, queue } of services.accounts.all()) {
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
        for (const account of accounts) this.set({ account }, await services.inflight.count(account));
      },
    });
    new Gauge({
      name: 'vqb_line_waiting',
      help:
        "1 while an account's line waits, by reason: paused (a key failure or an operator), " +
        'upstream_unreachable (its last requests got no answer or a 5xx), rate_limit or quota (the ' +
        'upstream asked), budget (creates held at a spending cap; polls go on), redis_down or ' +
        'redis_full (this process cannot store; paid results wait in memory)',
      labelNames: ['account', 'reason'],
      registers,
      async collect() {
        // Known without Redis, so set first: while Redis is down the reads below fail and the
        // rest of this family keeps its last values.
        if (redis) {
          for (const account of accounts) {
            this.set({ account, reason: 'redis_down' }, redis.waitReason === 'redis_down' ? 1 : 0);
            this.set({ account, reason: 'redis_full' }, redis.waitReason === 'redis_full' ? 1 : 0);
          }
        }
        const states = await withinScrape(lines());
        if (states === undefined) return;
        for (const line of states) {
          const account = line.account;
          this.set({ account, reason: 'paused' }, line.paused ? 1 : 0);
          this.set({ account, reason: 'upstream_unreachable' }, line.unreachable !== undefined ? 1 : 0);
          this.set({ account, reason: 'rate_limit' }, line.limitReason === 'rate_limit' ? 1 : 0);
          this.set({ account, reason: 'quota' }, line.limitReason === 'quota' ? 1 : 0);
          this.set({ account, reason: 'budget' }, line.budgetUntil !== undefined ? 1 : 0);
        }
      },
    });
    new Gauge({
      name: 'vqb_batches_at_risk',
      help:
        'Unfinished batches whose projected finish passes their deadline (docs/plans.md), by ' +
        'account, among the newest batches counted',
      labelNames: ['account'],
      registers,
      async collect() {
        const all = await withinScrape(batches());
        if (all === undefined) return;
        for (const account of accounts) this.set({ account }, 0);
        for (const b of all)
          if (b.atRiskSince !== undefined && b.finishedAt === undefined) this.inc({ account: b.account }, 1);
      },
    });
    new Gauge({
      name: 'vqb_account_paused',
      help:
        'An account paused, by its reason code: INVALID_API_KEY, EXPIRED_API_KEY, ' +
        'INSUFFICIENT_PERMISSIONS (its key), UNRECOGNISED_ANSWER (an upstream answer vqb cannot ' +
        'read: set VQ_ANSWER_* / VQ_STATES_*), PAUSED_BY_OPERATOR; absent while it runs',
      labelNames: ['account', 'code'],
      registers,
      async collect() {
        const states = await withinScrape(lines());
        if (states === undefined) return;
        this.reset();
        for (const line of states) if (line.pause) this.set({ account: line.account, code: line.pause.code }, 1);
      },
    });
    new Gauge({
      name: 'vqb_line_wait_end_timestamp_seconds',
      help:
        "When an account's current wait ends, Unix seconds, by reason (rate_limit, quota, " +
        'budget); absent while it does not wait',
      labelNames: ['account', 'reason'],
      registers,
      async collect() {
        const states = await lines();
        this.reset();
        for (const line of states) {
          if (line.limitedUntil !== undefined && line.limitReason)
            this.set({ account: line.account, reason: line.limitReason }, Math.round(line.limitedUntil / 1000));
          if (line.budgetUntil !== undefined)
            this.set({ account: line.account, reason: 'budget' }, Math.round(line.budgetUntil / 1000));
        }
      },
    });
  }

  /** What each account spent against its caps, in creates and in money, and its price. */
  #observeSpending(
    services: ObservedServices,
    read: { registers: Registry[]; spending: () => Promise<Spending[]> },
  ): void {
    const { registers, spending } = read;
    new Gauge({
      name: 'vqb_account_creates_used',
      help: "Creates counted against the account's spending caps, by period: this UTC day or month",
      labelNames: ['account', 'period'],
      registers,
      async collect() {
        for (const { account, spent } of await spending()) {
          this.set({ account, period: 'day' }, spent.today);
          this.set({ account, period: 'month' }, spent.thisMonth);
        }
      },
    });
    // Money (docs/accounts.md#money): what the creates above cost at the account's price, and the
    // price itself, so a dashboard multiplies any request counter by it. Absent without a price.
    const prices = new Map(services.config.accounts.flatMap((a) => (a.price ? [[a.id, a.price] as const] : [])));
    new Gauge({
      name: 'vqb_account_spend',
      help:
        "What the account's creates of this UTC day or month cost at its price " +
        '(VQ_PRICE_PER_QUERY or pricePerQuery), by currency; absent without a price',
      labelNames: ['account', 'currency', 'period'],
      registers,
      async collect() {
        for (const { account, spent } of await spending()) {
          const price = prices.get(account);
          if (!price) continue;
          const currency = price.currency;
          this.set({ account, currency, period: 'day' }, costOf(price, spent.today).amount);
          this.set({ account, currency, period: 'month' }, costOf(price, spent.thisMonth).amount);
        }
      },
    });
    new Gauge({
      name: 'vqb_account_price',
      help: 'The price in force per query created and per poll, by account and currency; absent without a price',
      labelNames: ['account', 'currency', 'per'],
      registers,
      collect() {
        for (const [account, price] of prices) {
          this.set({ account, currency: price.currency, per: 'query' }, price.perQueryMicros / 1e6);
          this.set({ account, currency: price.currency, per: 'poll' }, price.perPollMicros / 1e6);
        }
      },
    });
    new Gauge({
      name: 'vqb_account_creates_cap',
      help:
        "The account's spending cap in creates, by period (day, month: configured or set by vqb " +
        'budget); absent when there is none',
      labelNames: ['account', 'period'],
      registers,
      async collect() {
        const all = await spending();
        this.reset();
        for (const { account, caps } of all) {
          if (caps.perDay !== undefined) this.set({ account, period: 'day' }, caps.perDay);
          if (caps.perMonth !== undefined) this.set({ account, period: 'month' }, caps.perMonth);
        }
      },
    });
  }

  /** The newest batches by state, and each unfinished batch's progress. */
  #observeBatches(read: { registers: Registry[]; batches: () => Promise<ListedBatches> }): void {
    const { registers, batches } = read;
    new Gauge({
      name: 'vqb_batches',
      help: `Batches among the newest ${COUNTED_BATCHES}, by state`,
      labelNames: ['state'],
      registers,
      async collect() {
        const listed = await batches();
        const finished = listed.filter((b) => b.finishedAt !== undefined).length;
        this.set({ state: 'finished' }, finished);
        this.set({ state: 'running' }, listed.length - finished);
      },
    });
    const progress = (
      name: string,
      help: string,
      count: (c: { enqueued: number; done: number; failed: number }) => number,
    ) =>
      new Gauge({
        name,
        help: `${help}, per unfinished batch (the newest ${PROGRESS_BATCHES})`,
        labelNames: ['batch', 'account'],
        registers,
        async collect() {
          const unfinished = (await batches()).filter((b) => b.finishedAt === undefined).slice(0, PROGRESS_BATCHES);
          this.reset();
          for (const b of unfinished) this.set({ batch: b.id, account: b.account }, count(b.counts));
        },
      });
    progress('vqb_batch_plates_enqueued', 'Distinct valid plates of the batch put on the queue', (c) => c.enqueued);
    progress(
      'vqb_batch_plates_finished',
      'Plates of the batch with an outcome (done or failed)',
      (c) => c.done + c.failed,
    );
    progress('vqb_batch_plates_failed', 'Plates of the batch that failed', (c) => c.failed);
  }
}

/**
 * Whether the Accept header prefers OpenMetrics to Prometheus text (Prometheus itself sends
 * `application/openmetrics-text;version=1.0.0,…,text/plain;version=0.0.4;q=0.5,*\/*;q=0.1`).
 * No header, or a tie, gets Prometheus text.
 */
export function wantsOpenMetrics(accept: string | undefined): boolean {
  if (!accept) return false;
  let open = 0;
  let text = 0;
  for (const range of accept.split(',')) {
    const [type = '', ...params] = range.split(';').map((p) => p.trim().toLowerCase());
    const qParam = params.find((p) => p.startsWith('q='));
    const q = qParam === undefined ? 1 : Number(qParam.slice(2)) || 0;
    if (type === 'application/openmetrics-text') open = Math.max(open, q);
    else if (type === 'text/plain' || type === 'text/*' || type === '*/*') text = Math.max(text, q);
  }
  return open > 0 && open > text;
}

/** How long a scrape waits for a family read from Redis before leaving it out. */
const SCRAPE_READ_MS = 1_000;

/** The rendered family, or undefined when reading it failed or took longer than SCRAPE_READ_MS. */
async function withinScrape<T>(rendering: Promise<T>): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      rendering,
      new Promise<undefined>((resolve) => {
        timer = clock.setTimeout(() => resolve(undefined), SCRAPE_READ_MS);
      }),
    ]);
  } catch {
    return undefined;
  } finally {
    clock.clearTimeout(timer);
  }
}

/** `read` once for every caller while a call is pending: the gauges of one scrape share one read. */
function perScrape<T>(read: () => Promise<T>): () => Promise<T> {
  let pending: Promise<T> | undefined;
  return () => {
    pending ??= read().finally(() => {
      pending = undefined;
    });
    return pending;
  };
}

/** The exemplar of an observation: the active trace's id, when one is sampled (tracing on). */
function exemplar(): Record<string, string> {
  const traceId = activeTraceId();
  return traceId === undefined ? {} : { trace_id: traceId };
}

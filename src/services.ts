// The queue-side parts every producer, command and worker needs, opened once from a Config and
// closed together: the Redis connection, each account's record (its queue and line), and the stores
// over them.

import { type Clock, clock, clockWith } from './clock.js';
import type { Config } from './config.js';
import { jobKeyPrefix } from './engine/bullmq/keys.js';
import { Accounts } from './queue/accounts.js';
import { AnswerBook } from './queue/answers.js';
import { OutcomeStore } from './queue/batch/outcomes.js';
import { BatchStore } from './queue/batch/store.js';
import { BatchViews } from './queue/batch/view.js';
import { Budget } from './queue/budget.js';
import { CostLedger } from './queue/costs.js';
import { Feeder } from './queue/feeder.js';
import { InFlight } from './queue/inflight.js';
import { PlateSettle } from './queue/plate-settle.js';
import { PlateTraces } from './queue/plate-traces.js';
import { PollLearner } from './queue/poll-schedule.js';
import { KeyPools } from './queue/pool.js';
import { ReuseStore, sharingAccounts } from './queue/reuse.js';
import { Scheduler } from './queue/scheduler.js';
import { ProgressSeries } from './queue/series.js';
import type { RedisClient } from './redis/connection.js';
import { connectRedis, preflightRedis } from './redis/connection.js';
import type { RedisHealth } from './redis/health.js';
import { VqbKeys } from './redis/keys.js';
import { checkLayout } from './redis/layout.js';
import { tracing } from './telemetry/index.js';
import type { Resolve } from './webhooks/address.js';
import { WebhookOutbox } from './webhooks/outbox.js';

export interface QueueServices {
  config: Config;
  redis: RedisClient;
  /** The time this process runs on (src/clock.ts): built once here, handed to every part. */
  clock: Clock;
  keys: VqbKeys;
  /** Every configured account: its settings, queue and line, built once here. */
  accounts: Accounts;
  batches: BatchStore;
  /** A batch as readers see it: its hash joined with its costs, in-flight plates and cap (a query). */
  batchViews: BatchViews;
  outcomes: OutcomeStore;
  /** A plate's end in one step: outcome, in-flight slot given back, the last answer counted. */
  settle: PlateSettle;
  inflight: InFlight;
  /** First contact per account, and the answers that held an account (queue/answers.ts). */
  answers: AnswerBook;
  budget: Budget;
  costs: CostLedger;
  /** Samples of running batches and busy accounts over time, for the console's charts. */
  series: ProgressSeries;
  scheduler: Scheduler;
  feeder: Feeder;
  /** The shared first-poll schedule (one per process: its samples are sent together). */
  learner: PollLearner;
  /** Results kept for later batches (VQ_REUSE_WITHIN, shared pools): read by the dry run, written by the recorder. */
  reuse: ReuseStore;
  /** Pools of keys: which key of a pool serves, and what one that holds gives back (docs/plans.md). */
  pools: KeyPools;
  /** Emits webhook events (webhooks/): batch.finished, account.paused. */
  webhooks: WebhookOutbox;
  close(): Promise<void>;
}

/** Builds the services over an open connection (a worker process shares its command connection). */
export function queueServicesOn(
  config: Config,
  redis: RedisClient,
  time: Clock = clock,
  /** How callbackUrl host names are resolved before a batch is stored (default dns.lookup; tests inject). */
  resolve?: Resolve,
): Omit<QueueServices, 'close'> {
  const now = () => time.now();
  const keys = new VqbKeys(config);
  const accounts = new Accounts(config, redis, keys, now);
  const scheduler = new Scheduler(redis, keys, now);
  const costs = new CostLedger(redis, keys, () => config.accounts.map((a) => a.id), now);
  const inflight = new InFlight(redis, keys, config.maxInFlight, (account) => jobKeyPrefix(accounts.queue(account)));
  const budget = new Budget(redis, keys, config.accounts, now);
  const batches = new BatchStore(redis, keys, time);
  const batchViews = new BatchViews({ batches, costs, inflight, budget, time });
  const outcomes = new OutcomeStore(redis, keys);
  const learner = new PollLearner(redis, keys, config.poll, time);
  const reuse = new ReuseStore(redis, keys, outcomes, {
    keepMs: config.budget.reuseKeepMs,
    defaultWithinMs: config.budget.reuseWithinMs,
    sharing: sharingAccounts(config.accounts),
  });
  const answers = new AnswerBook(redis, keys);
  const feeder = new Feeder(scheduler, accounts, inflight, now, { redis, keys }, learner, (account) =>
    answers.meeting(account, now()),
  );
  const pools = new KeyPools(accounts, scheduler, batches, now);
  feeder.pools = pools;
  if (tracing()) feeder.traces = new PlateTraces(redis, keys);
  return {
    config,
    redis,
    clock: time,
    keys,
    accounts,
    batches,
    batchViews,
    outcomes,
    settle: new PlateSettle(redis, outcomes, inflight),
    inflight,
    answers,
    budget,
    costs,
    series: new ProgressSeries(redis, keys, now),
    scheduler,
    feeder,
    learner,
    reuse,
    pools,
    webhooks: new WebhookOutbox(config, redis, keys, batches, batchViews, now, resolve),
  };
}

export async function openQueueServices(
  config: Config,
  options: {
    failFast?: boolean;
    now?: () => number;
    warn?: (message: string) => void;
    health?: RedisHealth;
    resolve?: Resolve;
  } = {},
): Promise<QueueServices> {
  const redis = connectRedis(config.redis, { failFast: options.failFast ?? true, name: 'vqb-producer' });
  try {
    await preflightRedis(redis, config, options.warn);
    // Data of the single-slot layout (0.1.0) is moved by `vqb migrate`, never by a start.
    await checkLayout(redis, new VqbKeys(config), config);
  } catch (err) {
    redis.disconnect();
    throw err;
  }
  const services = queueServicesOn(config, redis, clockWith(options.now), options.resolve);
  // Batches stored before each account kept a list of its own get into it, once per deployment.
  await services.batches.ensureAccountLists();
  // BullMQ prints a queue's connection errors as raw multi-line blocks when nothing listens. A
  // process with a log routes them to its RedisHealth (one JSON line per change); a short command
  // hears of an outage from the call it awaits, so they are not repeated.
  for (const { id, queue } of services.accounts.all()) {
    if (options.health) options.health.quiet(queue, `queue ${id}`);
    else queue.on('error', () => undefined);
  }
  const unwatch = options.health?.watch(redis);
  return {
    ...services,
    async close() {
      unwatch?.();
      await services.accounts.close();
      await services.webhooks.close();
      await redis.quit().catch(() => redis.disconnect());
    },
  };
}

/** Opens the services, runs `work` with them, and closes them whatever happens. */
export async function withQueueServices<T>(config: Config, work: (services: QueueServices) => Promise<T>): Promise<T> {
  const services = await openQueueServices(config);
  try {
    return await work(services);
  } finally {
    await services.close();
  }
}

// Builds a worker process's parts from a Config: for every account with work a BullMQ Worker on
// the account's queue, its upstream client and its flow control (workers/account-workers.ts); one
// feeder loop that keeps those accounts' queues topped up from the scheduler; and the stores the
// processor writes to.
// `vqb work`, `vqb run`, `vqb serve --workers` and the library all use it.
import { UnrecoverableError, Worker } from 'bullmq';
import type { Logger } from 'pino';
import type { Dispatcher } from 'undici';
import { type Account, requireAccountUpstream } from '../src/accounts/account.js';
import { type Clock, clockWith } from '../src/clock.js';
import type { Config } from '../src/config.js';
import { RATE_LIMIT_SWITCH } from '../src/engine/bullmq/keys.js';
import type { WorkerMetrics } from '../src/metrics.js';
import type { AccountRecord } from '../src/queue/accounts.js';
import { CreateAdmission } from '../src/queue/admission.js';
import { UNRECOGNISED_ANSWER } from '../src/queue/answers.js';
import { HoldNews } from '../src/queue/hold-news.js';
import { JobFence } from '../src/queue/job-fence.js';
import type { AccountLine } from '../src/queue/line.js';
import type { PollLearner } from '../src/queue/poll-schedule.js';
import { WorkerPresence } from '../src/queue/presence.js';
import type { PlateJobData } from '../src/queue/types.js';
import type { RedisClient } from '../src/redis/connection.js';
import { connectRedis } from '../src/redis/connection.js';
import { RedisHealth } from '../src/redis/health.js';
import type { BatchRef } from '../src/redis/keys.js';
import { ReplicaAck } from '../src/redis/replica-ack.js';
import { type QueueServices, queueServicesOn } from '../src/services.js';
import { settlesWithin } from '../src/settle.js';
import { withQueueTelemetry } from '../src/telemetry/index.js';
import { UpstreamClient } from '../src/upstream/client.js';
import { createKeyProvider } from '../src/upstream/key.js';
import { answerReader } from '../src/upstream/response.js';
import type { Resolve } from '../src/webhooks/address.js';
import { type AccountRun, AccountWorkers, type PlateWorker } from './account-workers.js';
import { decide, decideJobFailure } from './actions.js';
import { Doorbell } from './doorbell.js';
import { feedAfterFirstContact } from './first-contact.js';
import { AccountFlow } from './flow.js';
import { startHousekeeping } from './housekeeping.js';
import { HeldLocks, LockLoss, watchLocks } from './lock-loss.js';
import { watchEventLoop } from './loop-watch.js';
import { AnswerTime, jobsNeeded, PollRoom } from './poll-room.js';
import { type JobResult, PlateProcessor } from './processor.js';
import { type HeldPaid, Recorder, storesOf } from './recorder.js';
import { keepPriorityOnStall } from './stalled-priority.js';
import { startWatchWorker, type WatchWorkerHandle } from './watch-worker.js';
import { startWebhookWorker } from './webhooks.js';

/** What every account's worker shares in one process. */
interface AccountWorkerDeps {
  config: Config;
  deps: WorkerDeps;
  services: Omit<QueueServices, 'close'>;
  commands: RedisClient;
  blocking: RedisClient;
  recorder: Recorder;
  learner: PollLearner;
  fence: JobFence;
  lockLoss: LockLoss;
  health: RedisHealth;
  onPaused: (accountId: string) => Promise<void>;
  doorbell: Doorbell;
  holdNews: HoldNews;
  /** Replicas' acks of this process's writes on `commands` (redis/replica-ack.ts). */
  replicas: ReplicaAck;
  now: () => number;
}

/**
 * One account's BullMQ Worker: its upstream client (its key), its flow (its pace, holds and
 * pauses), the plate processor, and what BullMQ reports on its own (stalls, lost locks, errors).
 */
function accountWorker(record: AccountRecord, shared: AccountWorkerDeps): AccountRun {
  const { account, line, queue } = record;
  const { config, deps, services, commands, blocking, recorder, learner, fence, lockLoss, health, onPaused, now } =
    shared;
  const { logger } = deps;
  const { baseUrl, apiKey } = requireAccountUpstream(account);
  const client = new UpstreamClient({
    baseUrl,
    apiKey: createKeyProvider(apiKey),
    connectTimeoutMs: config.upstreamHttp.connectTimeoutMs,
    requestTimeoutMs: config.upstreamHttp.requestTimeoutMs,
    answers: account.answers,
    now,
    ...(deps.dispatcher ? { dispatcher: deps.dispatcher } : {}),
  });
  if (deps.metrics) {
    const metrics = deps.metrics;
    client.onRequest((event) => metrics.request(account.id, event.operation, event.status, event.answerMs));
  }
  const flow = new AccountFlow({
    line,
    admission: new CreateAdmission(commands, line, services.inflight, services.budget, services.outcomes),
    inflight: services.inflight,
    answers: services.answers,
    budget: services.budget,
    scheduler: services.scheduler,
    jitterMs: config.pacingJitterMs,
    logger,
    ...(deps.metrics ? { metrics: deps.metrics } : {}),
    now,
    ...(deps.random ? { random: deps.random } : {}),
    onPaused,
    onUnderstood: async (accountId) => {
      await feedAfterFirstContact(services, accountId, (err, id) => {
        if (!health.outage(err)) logger.warn({ err, account: id }, 'could not feed after first contact');
      });
    },
    pools: services.pools,
    holdNews: shared.holdNews,
    clock: services.clock,
  });
  // With replicas to wait for (Sentinel): the mark, written on the connection the acks are asked
  // on, reaches a replica before the create goes out, or the wait gives up (best effort: a mark
  // lost in a failover only makes the re-sent create unflagged, and the id's write allows for it).
  const replicated = shared.replicas.enabled
    ? async (): Promise<void> => {
        await shared.replicas.wait();
      }
    : undefined;
  // A key failure stops this process's requests as it is read, not once it is recorded (flow.heardKeyFailure).
  client.onRequest((event) => {
    if (event.error !== undefined && decide(event.error).action === 'pause-account') flow.heardKeyFailure();
  });
  const pollRoom = new PollRoom(config.concurrency);
  // The jobs at work follow the rate in force (for `auto`, as this process last heard it) and how
  // fast the upstream answers (workers/poll-room.ts says why). Whole answers only: a request that
  // got none, or a 5xx or a cut one (refused, reset, timed out, a gateway) says how long we waited,
  // and more jobs at work would only send more into an upstream that is not answering.
  pollRoom.need(jobsNeeded(flow.ratePerSecond, 0));
  const answers = new AnswerTime();
  client.onRequest((event) => {
    if (event.answerMs === undefined || event.error?.kind === 'transient') return;
    pollRoom.need(jobsNeeded(flow.ratePerSecond, answers.add(event.answerMs)));
  });
  const processor = new PlateProcessor({
    ...(replicated ? { replicated } : {}),
    config,
    api: client,
    flow,
    recorder,
    learner,
    fence,
    lockLoss,
    logger,
    clock: services.clock,
    ...(deps.random ? { random: deps.random } : {}),
    ...(deps.afterFence ? { afterFence: deps.afterFence } : {}),
    pollRoom,
    closing: (batchId) => services.feeder.closingUntil(batchId),
  });
  const held = new HeldLocks();
  const worker: PlateWorker = new Worker<PlateJobData, JobResult, string>(
    queue.name,
    (job, token) => {
      pollRoom.fetched();
      return held.around(job, token, () => processor.process(job, token));
    },
    {
      // Shared by every account's Worker in this process; none holds a blocking connection of its
      // own: the doorbell wakes them (workers/doorbell.ts).
      connection: blocking,
      ...withQueueTelemetry(),
      // The queue's own (the account's slot: account-queues.ts), not the deployment's prefix.
      prefix: queue.opts.prefix!,
      // VQ_CONCURRENCY jobs at work, or more for the account's rate; polls waiting for their time
      // here add to it (PollRoom).
      concurrency: pollRoom.atWork,
      limiter: RATE_LIMIT_SWITCH,
      lockDuration: config.locks.lockDurationMs,
      stalledInterval: config.locks.stalledIntervalMs,
      maxStalledCount: config.locks.maxStalledCount,
      // Re-check a long hold at least this often, so `vqb resume` or a shortened quota is seen.
      maximumRateLimitDelay: 5_000,
    },
    shared.doorbell.backendFor(account.id, () => pollRoom.lend()),
  );
  pollRoom.attach(worker);
  shared.doorbell.listen(worker, account.id);
  // A worker that died leaves its jobs to the stalled check, which would put them before every
  // prioritized job, an interactive plate's too (workers/stalled-priority.ts).
  keepPriorityOnStall(worker, queue, (err, jobId) => {
    if (!health.outage(err)) logger.warn({ err, jobId }, 'could not put a stalled job back at its priority');
  });
  recordBullmqFailures(worker, recorder, logger);
  // A lost lock is its own event (one warning naming the job), not a Redis client error.
  watchLocks(worker, held, lockLoss, account.id, config.locks.lockDurationMs, (err) =>
    health.report(err, `worker ${account.id}`),
  );
  return { worker, client, flow, stopWaits: () => processor.stopWaits() };
}

/** A job failed by BullMQ itself (stalled too often) never ran our code: its outcome is recorded anyway. */
function recordBullmqFailures(worker: PlateWorker, recorder: Recorder, logger: Logger): void {
  worker.on('failed', (job, err) => {
    if (!job || err instanceof UnrecoverableError) return;
    const code = decideJobFailure(err.message, job.attemptsMade < (job.opts.attempts ?? 1));
    if (!code) return;
    recorder
      .record(job, job.data, { code, message: err.message })
      .catch((recordErr: unknown) =>
        logger.error({ err: recordErr, jobId: job.id }, 'could not record the outcome of a failed job'),
      );
  });
}

export interface WorkerDeps {
  logger: Logger;
  /** Injected to share a pool or to reach a test server; by default each client makes its own. */
  dispatcher?: Dispatcher;
  /** Name resolution of webhook deliveries (tests inject the answers); by default dns.lookup. */
  webhookResolve?: Resolve;
  metrics?: WorkerMetrics;
  now?: () => number;
  /** The time the worker runs on (every part of it: src/clock.ts); default the process's, with `now`. */
  clock?: Clock;
  random?: () => number;
  /** The process's view of Redis (serve shares its own); by default the worker makes one. */
  health?: RedisHealth;
  /** Tests only: awaited between a create's fencing check and its send (see PlateProcessor). */
  afterFence?: () => Promise<void>;
  /**
   * Tests only: how often the active set is read while wakes are heard (workers/housekeeping.ts
   * ACTIVE_READ_EVERY_MS); set past a test's timeout, only a wake can start an account.
   */
  activeReadEveryMs?: number;
}

export interface WorkerHandle {
  /** The BullMQ Workers running now: one per account with work. */
  readonly workers: PlateWorker[];
  /** The webhook deliveries' worker (none without VQ_WEBHOOK_SECRET). */
  webhookWorker: ReturnType<typeof startWebhookWorker>;
  /** The watch lists' rounds (starts them when due, compares them when done). */
  watchWorker: WatchWorkerHandle;
  services: Omit<QueueServices, 'close'>;
  /** The upstream clients of the accounts running now. */
  readonly clients: Map<string, UpstreamClient>;
  learner: PollLearner;
  health: RedisHealth;
  /** Stop taking jobs, let the running ones finish and persist, then disconnect. */
  close(): Promise<void>;
  /**
   * `close`, but no longer than `ms`: past it (Redis gone, a job stuck) the connections are cut
   * and what this process held unstored is returned, for the caller to write somewhere safe.
   */
  closeWithin(ms: number, cut?: Promise<unknown>): Promise<{ clean: boolean; held: HeldPaid[] }>;
}

export function startWorker(config: Config, deps: WorkerDeps): WorkerHandle {
  const { logger } = deps;
  // The one clock of this process (src/clock.ts), handed down from the services built on it.
  const time = deps.clock ?? clockWith(deps.now);
  const now = () => time.now();
  for (const account of config.accounts) requireAccountUpstream(account);
  const { commands, blocking, wakes, health, unwatch } = connectionsOf(config, deps, time);
  const services = queueServicesOn(config, commands, time, deps.webhookResolve);
  for (const { id, queue } of services.accounts.all()) health.quiet(queue, `queue ${id}`);
  // A pool's decisions (a key's share moved, keys that look like one quota) are one line each.
  services.pools.logTo(logger);
  const learner = services.learner;
  const { onBatchFinished, onPaused } = webhookEmitters(services, logger);
  const webhookWorker = startWebhookWorker(config, {
    connection: blocking,
    deliveries: services.webhooks.deliveries,
    logger,
    health,
    ...(deps.metrics ? { metrics: deps.metrics } : {}),
    ...(deps.webhookResolve ? { resolve: deps.webhookResolve } : {}),
    now,
  });
  // On the connection the settle and the fence write on: WAIT speaks for its own connection's writes.
  const replicas = new ReplicaAck(commands, config.redis.replicaAcks);
  const recorder = recorderOf(services, { deps, now, onBatchFinished, health, replicas });
  const fence = new JobFence(commands);
  const lockLoss = new LockLoss(logger, deps.metrics);
  const doorbell = new Doorbell(services.clock);
  const holdNews = new HoldNews();
  const watchWorker = startWatchWorker(config, { services, connection: blocking, doorbell, logger, health, now });
  const shared: AccountWorkerDeps = {
    config,
    deps,
    services,
    commands,
    blocking,
    recorder,
    learner,
    fence,
    lockLoss,
    health,
    onPaused,
    doorbell,
    holdNews,
    replicas,
    now,
  };
  const runs = new AccountWorkers(services.accounts, (record) => accountWorker(record, shared), now);
  // This process's polls ask which batches are closing: its feeds mark them.
  services.feeder.marksClosing = true;
  for (const { account, line } of services.accounts.all()) void resumeIfRead(services, account, line, logger);

  const housekeeping = startHousekeeping(config, services, runs, doorbell, health, logger, {
    ...(deps.random ? { random: deps.random } : {}),
    ...(deps.activeReadEveryMs !== undefined ? { activeReadEveryMs: deps.activeReadEveryMs } : {}),
  });
  services.feeder.listen(wakes, housekeeping.wake, housekeeping.listening).catch((err: unknown) => {
    // The feed pass still rings every Worker whose queue holds jobs, and reads the active set
    // each pass; only the shortcut is lost.
    if (!health.outage(err)) logger.warn({ err }, 'could not listen for wakes: Workers look at each feed pass');
  });
  // Holds as they are set, on the same connection: until it is subscribed, requests ask Redis.
  holdNews.listen(wakes, services.keys).catch((err: unknown) => {
    if (!health.outage(err)) logger.warn({ err }, 'could not listen for holds: each request asks Redis');
  });

  // Alive for `vqb retry` and the API's reruns, which say when no worker will take what they queue.
  const stopPresence = new WorkerPresence(commands, services.keys, now).start((err) => {
    if (!health.outage(err)) logger.warn({ err }, 'could not record this worker as alive');
  });

  let closing: Promise<void> | undefined;
  return {
    get workers() {
      return runs.workers();
    },
    webhookWorker,
    watchWorker,
    services,
    get clients() {
      return runs.clients();
    },
    learner,
    health,
    close() {
      closing ??= (async () => {
        await housekeeping.stop();
        await Promise.all([runs.closeAll(), webhookWorker?.close(), watchWorker.close()]);
        // The first-poll samples gathered since the last send (queue/poll-schedule.ts).
        await learner.flush().catch((err: unknown) => {
          if (!health.outage(err)) logger.warn({ err }, 'could not send the poll schedule its last samples');
        });
        await services.accounts.close();
        await services.webhooks.close();
        await stopPresence();
        for (const stop of unwatch) stop();
        health.close();
        await Promise.allSettled([commands.quit(), blocking.quit(), wakes.quit()]);
      })();
      return closing;
    },
    async closeWithin(ms, cut) {
      // `cut` (a second Ctrl-C) ends the wait at once, as the timeout would.
      const clean = await settlesWithin(this.close(), ms, cut);
      if (clean) return { clean, held: [] };
      const held = recorder.held();
      // Nothing more will be stored: stop every retry and reconnect, quietly.
      health.close();
      for (const stop of unwatch) stop();
      runs.forceAll();
      commands.disconnect();
      blocking.disconnect();
      wakes.disconnect();
      return { clean, held };
    },
  };
}

/**
 * A worker process's three connections to Redis and the one health they report to: an outage is
 * one log line per change of state instead of a block per reconnect attempt.
 */
function connectionsOf(config: Config, deps: WorkerDeps, time: Clock) {
  // One connection for commands (stores, queues); BullMQ makes its blocking ones from `blocking`.
  const commands: RedisClient = connectRedis(config.redis, { name: 'vqb-worker-commands' });
  const blocking: RedisClient = connectRedis(config.redis, { name: 'vqb-worker' });
  // Subscribed to the wake channel (queue/feeder.ts): a producer fed an account's queue.
  const wakes: RedisClient = connectRedis(config.redis, { name: 'vqb-worker-wake' });
  const health = deps.health ?? new RedisHealth(deps.logger);
  const unwatch = [
    health.watch(commands),
    health.watch(blocking),
    health.watch(wakes),
    health.heartbeat(commands),
    watchEventLoop(deps.logger, config.locks.lockDurationMs, 1_000, time),
  ];
  return { commands, blocking, wakes, health, unwatch };
}

/** The process's recorder: where each plate's outcome, costs and reusable result are stored. */
function recorderOf(
  services: Omit<QueueServices, 'close'>,
  parts: {
    deps: WorkerDeps;
    now: () => number;
    onBatchFinished: (batch: BatchRef) => Promise<void>;
    health: RedisHealth;
    replicas: ReplicaAck;
  },
): Recorder {
  const { deps, now, onBatchFinished, health, replicas } = parts;
  return new Recorder({
    // The services were built on this process's command connection (queueServicesOn above).
    ...storesOf(services),
    ...(deps.metrics ? { metrics: deps.metrics } : {}),
    now,
    clock: services.clock,
    onBatchFinished,
    health,
    replicas,
  });
}

/**
 * An account held for an answer vqb could not read resumes by itself in a process whose settings
 * (VQ_ANSWER_*, VQ_STATES_*, the accounts file) read the answer it kept: its plates then read
 * their kept answers again (a paid create is polled, never sent again).
 */
async function resumeIfRead(
  services: Omit<QueueServices, 'close'>,
  account: Account,
  line: AccountLine,
  logger: Logger,
): Promise<void> {
  try {
    if ((await services.answers.verdict(line, answerReader(account.answers))) !== 'reads') return;
    await services.answers.reopen(account.id);
    const lifted = await line.resume();
    logger.info(
      { event: 'account.resumed', account: account.id, code: UNRECOGNISED_ANSWER },
      'the held answer reads with the settings in force: the account resumes',
    );
    await services.webhooks.accountResumed(account.id, lifted);
  } catch (err) {
    logger.warn({ err, account: account.id }, 'could not look whether the held answer reads now');
  }
}

/**
 * Webhook events are emitted by the process that saw them happen; a failure to emit is logged,
 * never allowed to fail the plate's job (its outcome is stored already).
 */
function webhookEmitters(
  services: Omit<QueueServices, 'close'>,
  logger: Logger,
): { onBatchFinished: (batch: BatchRef) => Promise<void>; onPaused: (accountId: string) => Promise<void> } {
  const onBatchFinished = async (batch: BatchRef) => {
    try {
      const id = await services.webhooks.batchFinished(batch);
      if (id) logger.info({ batchId: batch.id, webhookId: id }, 'webhook batch.finished emitted');
    } catch (err) {
      logger.error({ err, batchId: batch.id }, 'could not emit the batch.finished webhook');
    }
  };
  const onPaused = async (accountId: string) => {
    try {
      const pause = (await services.accounts.line(accountId).state()).pause;
      if (!pause) return;
      const ids = await services.webhooks.accountPaused(accountId, pause);
      if (ids.length > 0) logger.info({ account: accountId, webhookIds: ids }, 'webhook account.paused emitted');
    } catch (err) {
      logger.error({ err, account: accountId }, 'could not emit the account.paused webhook');
    }
  };
  return { onBatchFinished, onPaused };
}

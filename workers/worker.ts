// Builds a worker process's parts from a Config: the BullMQ Worker with the global limiter, the
// upstream client, and the stores the processor writes to. `vqb work` and `vqb run` both use it.
import { Worker, type RateLimiterOptions } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Dispatcher } from 'undici';
import type { Logger } from 'pino';
import { requireUpstream, type Config } from '../src/config.js';
import type { WorkerMetrics } from '../src/metrics.js';
import { Budget } from '../src/queue/budget.js';
import { CostLedger } from '../src/queue/costs.js';
import { InFlight } from '../src/queue/inflight.js';
import { ReuseStore } from '../src/queue/reuse.js';
import { LineControl } from '../src/queue/line.js';
import { OutcomeStore } from '../src/queue/outcomes.js';
import { createPlateQueue, type PlateQueue } from '../src/queue/plate-queue.js';
import { connectRedis, VqbKeys } from '../src/queue/redis.js';
import type { PlateJobData } from '../src/queue/types.js';
import { UpstreamClient } from '../src/upstream/client.js';
import { createKeyProvider } from '../src/upstream/key.js';
import { PlateProcessor, type JobResult } from './processor.js';
import { PollLearner } from './poll-schedule.js';

/**
 * BullMQ's limiter admits `max` job starts per `duration`, in windows that open at the first start.
 * That lets up to 2×max through in a sliding window straddling two windows, which an upstream
 * counting a sliding window or a token bucket answers with 429s. Smooth mode admits one start per
 * duration/max instead (plus a small margin for network jitter), so no window of any alignment
 * sees more than the limit.
 */
export function limiterFor(config: Pick<Config, 'rateLimit' | 'pacing' | 'pacingMargin'>): RateLimiterOptions {
  const { max, durationMs } = config.rateLimit;
  if (config.pacing === 'window') return { max, duration: durationMs };
  return { max: 1, duration: Math.max(1, Math.ceil((durationMs / max) * (1 + config.pacingMargin))) };
}

/** The smallest gap between two job starts under the limiter. */
export function pacingIntervalMs(config: Pick<Config, 'rateLimit' | 'pacing' | 'pacingMargin'>): number {
  const limiter = limiterFor(config);
  return limiter.duration / limiter.max;
}

export interface WorkerDeps {
  logger: Logger;
  /** Injected to share a pool or to reach a test server; by default the client makes its own. */
  dispatcher?: Dispatcher;
  metrics?: WorkerMetrics;
  now?: () => number;
  random?: () => number;
}

export interface WorkerHandle {
  worker: Worker<PlateJobData, JobResult, string>;
  queue: PlateQueue;
  client: UpstreamClient;
  line: LineControl;
  learner: PollLearner;
  /** Stop taking jobs, let the running ones finish and persist, then disconnect. */
  close(): Promise<void>;
}

export function startWorker(config: Config, deps: WorkerDeps): WorkerHandle {
  const { baseUrl, apiKey } = requireUpstream(config);
  const logger = deps.logger;
  // One connection for commands (stores, queue), one that BullMQ uses for the worker's blocking fetch.
  const commands: Redis = connectRedis(config.redisUrl, { name: 'vqb-worker-commands' });
  const blocking: Redis = connectRedis(config.redisUrl, { name: 'vqb-worker' });
  const keys = new VqbKeys(config);
  const queue = createPlateQueue(config, commands);
  const now = deps.now ?? Date.now;
  const client = new UpstreamClient({
    baseUrl,
    apiKey: createKeyProvider(apiKey),
    connectTimeoutMs: config.upstreamHttp.connectTimeoutMs,
    requestTimeoutMs: config.upstreamHttp.requestTimeoutMs,
    now,
    ...(deps.dispatcher ? { dispatcher: deps.dispatcher } : {}),
  });
  if (deps.metrics) {
    const metrics = deps.metrics;
    client.onRequest((event) => metrics.request(event.operation, event.status));
  }
  const line = new LineControl(queue, commands, keys, now);
  const learner = new PollLearner(commands, keys, config.poll, now);
  const outcomes = new OutcomeStore(commands, keys);
  const processor = new PlateProcessor({
    config,
    api: client,
    redis: commands,
    keys,
    outcomes,
    inflight: new InFlight(commands, keys, config.maxInFlight, queue.toKey('')),
    line,
    learner,
    ledger: new CostLedger(commands, keys, now),
    budget: new Budget(commands, keys, config.budget, now),
    reuse: new ReuseStore(commands, keys, config.budget.reuseKeepMs),
    queue,
    logger,
    pacingMs: pacingIntervalMs(config),
    rateWindowMs: config.rateLimit.durationMs,
    ...(deps.metrics ? { metrics: deps.metrics } : {}),
    now,
    ...(deps.random ? { random: deps.random } : {}),
  });

  const worker = new Worker<PlateJobData, JobResult, string>(config.queueName, processor.process, {
    connection: blocking,
    prefix: config.prefix,
    concurrency: config.concurrency,
    limiter: limiterFor(config),
    lockDuration: config.locks.lockDurationMs,
    stalledInterval: config.locks.stalledIntervalMs,
    maxStalledCount: config.locks.maxStalledCount,
    // Re-check a long upstream pause at least this often, so `vqb resume` or a shortened quota is seen.
    maximumRateLimitDelay: 5_000,
  });

  worker.on('failed', (job, err) => {
    // A job failed by BullMQ itself (stalled too often) never ran our code: keep a record anyway.
    if (!job || err.name === 'UnrecoverableError') return;
    if (job.attemptsMade < (job.opts.attempts ?? 1) && !/stalled/i.test(err.message)) return;
    outcomes
      .record(
        {
          batchId: job.data.batchId,
          plate: job.data.plate,
          status: 'failed',
          ...(job.data.queryId ? { queryId: job.data.queryId } : {}),
          error: { code: /stalled/i.test(err.message) ? 'JOB_STALLED' : 'INTERNAL_ERROR', message: err.message },
          enqueuedAt: job.timestamp,
          finishedAt: now(),
          requests: job.data.requests,
          polls: job.data.polls,
          attempts: job.attemptsMade,
          ...(job.data.possibleDuplicate ? { possibleDuplicate: true } : {}),
        },
        job.id!,
      )
      .catch((recordErr: unknown) => logger.error({ err: recordErr, jobId: job.id }, 'could not record the outcome of a failed job'));
  });
  worker.on('error', (err) => logger.error({ err }, 'worker error'));

  let closing: Promise<void> | undefined;
  return {
    worker,
    queue,
    client,
    line,
    learner,
    close() {
      closing ??= (async () => {
        await worker.close();
        await client.close();
        await queue.close();
        await Promise.allSettled([commands.quit(), blocking.quit()]);
      })();
      return closing;
    },
  };
}

// The watch lists' worker, in every worker process: a BullMQ Worker on `<VQ_QUEUE>.watches` takes
// each due round (one job per due time, made by the watch's job scheduler, so however many
// processes run, a round fires once) and starts it (src/watch/rounds.ts: a batch of the list's
// plates); and every VQ_WATCH_SWEEP it looks for rounds whose batch is done and compares them
// (whichever process looks first, under a lock). Starting a round only enqueues: the plates are
// worked by the account's ordinary workers, anywhere.
//
// Like the accounts' Workers it holds no blocking connection of its own (workers/doorbell.ts):
// it waits on the process's doorbell, bounded by BullMQ's own block timeout (its next delayed
// job: each due time of a schedule), and is rung when this process adds a round job. A round job
// another process adds with no delay (an `every` watch's first round, a round that waited for the
// one before) is fetched by that process, or here within BullMQ's drainDelay (5 s).

import { Worker } from 'bullmq';
import type { Logger } from 'pino';
import type { Config } from '../src/config.js';
import type { RedisClient } from '../src/redis/connection.js';
import type { RedisHealth } from '../src/redis/health.js';
import type { QueueServices } from '../src/services.js';
import { type RoundJobData, watchQueueName } from '../src/watch/schedules.js';
import { Watches } from '../src/watch/watches.js';
import type { Doorbell } from './doorbell.js';

/** The doorbell's name for this Worker: no account id can be it (account ids are [a-z0-9_-]). */
const BELL = '#watches';

export interface WatchWorkerHandle {
  watches: Watches;
  close(): Promise<void>;
}

export function startWatchWorker(
  config: Config,
  deps: {
    services: Omit<QueueServices, 'close'>;
    connection: RedisClient;
    logger: Logger;
    doorbell: Doorbell;
    health?: RedisHealth;
    now?: () => number;
  },
): WatchWorkerHandle {
  const log = deps.logger.child({ part: 'watch' });
  const watches = new Watches(deps.services, log, deps.now, () => deps.doorbell.ring(BELL));
  const worker = new Worker<RoundJobData, string, string>(
    watchQueueName(config),
    async (job) => {
      const outcome = await watches.rounds.fire({ account: job.data.account, name: job.data.name }, job.id ?? job.name);
      log.debug({ watch: job.data.name, account: job.data.account, jobId: job.id, outcome }, 'watch round fired');
      return outcome;
    },
    {
      connection: deps.connection,
      prefix: config.prefix,
      concurrency: 1,
      lockDuration: config.locks.lockDurationMs,
      stalledInterval: config.locks.stalledIntervalMs,
    },
    deps.doorbell.backendFor(BELL),
  );
  deps.doorbell.listen(worker, BELL);
  worker.on('error', (err) => {
    if (!deps.health?.outage(err)) log.error({ err }, 'watch worker error');
  });
  let sweeping: Promise<unknown> = Promise.resolve();
  const sweep = () => {
    sweeping = watches.rounds.sweep().catch((err: unknown) => {
      if (!deps.health?.outage(err)) log.error({ err }, 'could not look for finished watch rounds');
    });
  };
  const timer = deps.services.clock.setInterval(sweep, config.watch.sweepMs);
  timer.unref();
  return {
    watches,
    async close() {
      deps.services.clock.clearTimeout(timer);
      await sweeping;
      await worker.close();
      await watches.close();
    },
  };
}

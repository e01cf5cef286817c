// A worker process's timers, beside its Workers: the feed pass that keeps the queues of the
// accounts with work topped up from the scheduler, the recovery of plates a crashed feeder staged,
// the sweep for webhook events a stopped process noticed but did not send, and the deadline watch.

import type { Logger } from 'pino';
import type { Config } from '../src/config.js';
import { watchDeadlines } from '../src/plans/watch.js';
import { OPERATOR_PAUSE } from '../src/queue/line.js';
import type { RedisHealth } from '../src/redis/health.js';
import type { QueueServices } from '../src/services.js';
import type { AccountWorkers } from './account-workers.js';
import type { Doorbell } from './doorbell.js';
import { ACTIVE_READ_EVERY_MS, KnownActive } from './known-active.js';

/** How often each process tops up the account queues from the scheduler. */
export const FEED_EVERY_MS = 200;
/** The longest a process leaves an account that meets its upstream unfed, should the wake that ends it be lost. */
const MEETING_REST_MS = 5_000;
const RECOVER_EVERY_MS = 10_000;
const WEBHOOK_SWEEP_MS = 60_000;
/** How often the deadline batches' finish is projected again (plans/watch.ts): at risk is said within this. */
const DEADLINE_WATCH_MS = 2_000;

/**
 * A worker process's timers: feeding the queues of the accounts with work and running their
 * Workers (every FEED_EVERY_MS), recovering staged plates a crashed feeder left (every
 * RECOVER_EVERY_MS), and emitting webhook events a stopped process noticed but did not send (at
 * start, then every minute). The accounts with work are known from the wakes that name them
 * (known-active.ts, once `listening()`): a process with nothing to do reads nothing per pass.
 */
export function startHousekeeping(
  config: Config,
  services: Omit<QueueServices, 'close'>,
  runs: AccountWorkers,
  doorbell: Doorbell,
  health: RedisHealth,
  logger: Logger,
  {
    random = Math.random,
    activeReadEveryMs = ACTIVE_READ_EVERY_MS,
  }: { random?: () => number; activeReadEveryMs?: number } = {},
): { stop(): Promise<void>; wake(accountId: string): void; listening(standing: boolean): void } {
  // The worker's clock (services.ts): its feeds, sweeps and watches run on its timers.
  const now = () => services.clock.now();
  const configured = new Set(config.accounts.map((a) => a.id));
  // Busy accounts whose last feed here found their queue full, until when they rest (Feeder.restMs),
  // and the rate that rest was reckoned at.
  const restUntil = new Map<string, { until: number; rate: number | undefined }>();
  // Wakes heard per account: a feed that was answered "meeting, nothing fed" before a wake that
  // came while it was out (first contact ended meanwhile) must not set a rest the wake has ended.
  const wakes = new Map<string, number>();
  // The first feed looks at every account once: work queued before the active set existed (an
  // upgrade) or while no process ran is found, and idle accounts leave the set.
  let first = true;
  // The active set as this process knows it (known-active.ts): read now and then, kept from wakes.
  const active = new KnownActive(services.scheduler, configured, activeReadEveryMs);
  const feed = async () => {
    if (first) await services.scheduler.activate([...configured]);
    first = false;
    const busy = new Set<string>();
    const at = now();
    // All at once: the commands of many accounts share round trips on the connection.
    await Promise.all(
      (await active.accounts(at)).map(async (accountId) => {
        const rate = runs.flow(accountId)?.ratePerSecond;
        // A rest reckoned at a rate since raised (a limit heard, a slow start's step: a cold
        // account's first seconds) ends: its queue would run dry long before the rest did.
        const rest = restUntil.get(accountId);
        if (rest && rest.until > at && !(rate !== undefined && rate > (rest.rate ?? rate) * 1.5)) {
          busy.add(accountId);
          return;
        }
        const woken = wakes.get(accountId);
        const { fed, idle, waiting, limitedMs, meeting } = await services.feeder.feed(accountId, rate);
        if (idle) {
          restUntil.delete(accountId);
          // Left the set, unless a wake came while the feed was out (work added meanwhile).
          if (wakes.get(accountId) === woken) active.left(accountId);
          return;
        }
        // Rests end spread over ±25 % of their length: accounts that started together (a thousand
        // batches enqueued at once) would otherwise all come due on the same tick, one burst of
        // feeds and wakes that delays the requests waiting for their slots in this process.
        // While the account meets its upstream its one plate is out: it rests until the wake that
        // ends first contact (wake() below), MEETING_REST_MS at the most should the wake be lost.
        // A wake heard while this feed was out is newer than what the feed read: it sets no rest
        // (read "meeting" just before another account's answer ended first contact, a cold gate's
        // account sat out that rest: idle from its first second to its fifth).
        if (fed > 0 || wakes.get(accountId) !== woken) restUntil.delete(accountId);
        else if (meeting) restUntil.set(accountId, { until: at + MEETING_REST_MS, rate });
        else {
          const restMs = services.feeder.restMs(accountId, rate, FEED_EVERY_MS) * (0.75 + random() / 2);
          restUntil.set(accountId, { until: at + restMs, rate });
        }
        busy.add(accountId);
        runs.busy(accountId);
        // Jobs wait on the queue (this feed's, or put there by anyone since): a Worker waiting here
        // fetches, now or when the queue's rate-limit switch goes off (a fetch before would find none).
        if (waiting > 0 && limitedMs > 0) doorbell.ringAt(accountId, now() + limitedMs);
        else if (waiting > 0) doorbell.ring(accountId);
      }),
    );
    for (const accountId of restUntil.keys()) if (!busy.has(accountId)) restUntil.delete(accountId);
    runs.retire(busy);
  };
  // The pass in flight, awaited by stop(): a pass that ran on past the stop would start the Workers
  // of its busy accounts again after they were closed (jobs taken, then left active at the exit).
  let feeding: Promise<void> | undefined;
  const feedTimer = services.clock.setInterval(() => {
    if (feeding) return;
    feeding = feed()
      .catch((err: unknown) => {
        if (!health.outage(err)) logger.error({ err }, 'could not feed the account queues');
      })
      .finally(() => {
        feeding = undefined;
      });
  }, FEED_EVERY_MS);
  const recoverTimer = services.clock.setInterval(() => {
    // Staged plates keep their account active, so the running accounts are the ones to look at.
    for (const accountId of runs.ids()) {
      services.feeder.recover(accountId).catch((err: unknown) => {
        if (!health.outage(err)) logger.error({ err, account: accountId }, 'could not recover staged plates');
      });
    }
  }, RECOVER_EVERY_MS);

  const webhookSweep = startWebhookSweep(config, services, health, logger);
  const deadlineWatch = startDeadlineWatch(services, configured, health, logger, now);
  return {
    // A wake (queue/feeder.ts: a producer or another process put jobs on the queue, or ended first
    // contact): the account's rest ends, so the next feed pass tops its queue up, and its Worker,
    // if any, fetches now, beyond its concurrency if need be (an interactive plate: ringNew).
    wake(accountId: string) {
      restUntil.delete(accountId);
      wakes.set(accountId, (wakes.get(accountId) ?? 0) + 1);
      active.heard(accountId);
      doorbell.ringNew(accountId);
    },
    // The wake subscription stands (accounts with work are heard of), or was cut (each pass reads).
    listening: (standing: boolean) => (standing ? active.listening() : active.deaf()),
    async stop() {
      services.clock.clearTimeout(feedTimer);
      services.clock.clearTimeout(recoverTimer);
      await feeding;
      await webhookSweep.stop();
      await deadlineWatch.stop();
    },
  };
}

/** Webhook events a crashed process noticed but did not emit: looked for at start and every minute. */
function startWebhookSweep(
  config: Config,
  services: Omit<QueueServices, 'close'>,
  health: RedisHealth,
  logger: Logger,
): { stop(): Promise<void> } {
  const sweepWebhooks = async () => {
    if (config.webhooks.secret === undefined) return;
    const pauses = (await services.accounts.states()).flatMap((state) =>
      state.pause && state.pause.code !== OPERATOR_PAUSE ? [{ account: state.account, pause: state.pause }] : [],
    );
    const ids = await services.webhooks.sweep(pauses);
    if (ids.length > 0)
      logger.info(
        { webhookIds: ids },
        'webhooks emitted that were noticed but not sent (a process stopped in between)',
      );
  };
  let sweeping: Promise<void> = Promise.resolve();
  const sweep = () => {
    sweeping = sweepWebhooks().catch((err: unknown) => {
      if (!health.outage(err)) logger.error({ err }, 'could not look for unsent webhooks');
    });
  };
  sweep();
  const sweepTimer = services.clock.setInterval(sweep, WEBHOOK_SWEEP_MS);
  return {
    async stop() {
      services.clock.clearTimeout(sweepTimer);
      await sweeping;
    },
  };
}

/** The deadline batches' finish projected again every DEADLINE_WATCH_MS: one line per turn. */
function startDeadlineWatch(
  services: Omit<QueueServices, 'close'>,
  configured: ReadonlySet<string>,
  health: RedisHealth,
  logger: Logger,
  now: () => number,
): { stop(): Promise<void> } {
  // One line per turn (at risk, back on track), whichever process noticed it first.
  let watching: Promise<void> = Promise.resolve();
  let watchBusy = false;
  const watchTimer = services.clock.setInterval(() => {
    if (watchBusy) return;
    watchBusy = true;
    watching = watchDeadlines(services, configured, now())
      .then((turns) => {
        for (const turn of turns)
          logger.info(
            { batchId: turn.batchId, account: turn.account, slackSec: Math.round((turn.slackMs ?? 0) / 1000) },
            turn.type === 'batch.at_risk'
              ? 'batch at risk of missing its deadline'
              : 'batch back on track for its deadline',
          );
      })
      .catch((err: unknown) => {
        if (!health.outage(err)) logger.error({ err }, 'could not watch the deadlines');
      })
      .finally(() => {
        watchBusy = false;
      });
  }, DEADLINE_WATCH_MS);
  return {
    async stop() {
      services.clock.clearTimeout(watchTimer);
      await watching;
    },
  };
}

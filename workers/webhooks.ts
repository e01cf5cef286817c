// The webhook deliveries' worker: a BullMQ Worker on `<VQ_QUEUE>.webhooks`, started in every
// worker process beside the plate workers (workers/worker.ts), with its own concurrency, so a
// receiver that is slow or down delays only its own deliveries. Each job is one (event, target):
// at least once, retried with exponential backoff (VQ_WEBHOOK_ATTEMPTS, VQ_WEBHOOK_BACKOFF) under
// the same webhook-id, its state written to the batch's delivery log after every attempt.
//
// | answer                         | what happens                                       |
// |--------------------------------|----------------------------------------------------|
// | 2xx                            | delivered                                          |
// | 410 Gone                       | given up at once (the receiver says: stop)         |
// | other status, no answer, error | retried with backoff; failed after the last attempt |
// | host no longer on the list     | given up at once, nothing sent                     |

import { UnrecoverableError, Worker } from 'bullmq';
import type { Logger } from 'pino';
import type { Dispatcher } from 'undici';
import type { Config } from '../src/config.js';
import { noMetrics, type WebhookResult, type WorkerMetrics } from '../src/metrics.js';
import type { RedisClient } from '../src/queue/redis.js';
import type { RedisHealth } from '../src/queue/redis-health.js';
import type { DeliveryLog, DeliveryRecord } from '../src/sinks/webhooks/deliveries.js';
import { type WebhookJobData, webhookQueueName } from '../src/sinks/webhooks/outbox.js';
import { WebhookSender } from '../src/sinks/webhooks/sender.js';
import { hostAllowed } from '../src/sinks/webhooks/target.js';

/** Deliveries one process makes at once: each mostly waits on a receiver. */
const CONCURRENCY = 16;

export interface WebhookWorkerDeps {
  connection: RedisClient;
  deliveries: DeliveryLog;
  logger: Logger;
  metrics?: WorkerMetrics;
  dispatcher?: Dispatcher;
  now?: () => number;
  /** Outages are logged by the process's one Redis health, once per change of state. */
  health?: RedisHealth;
}

/** Starts the deliveries' worker; undefined when no secret is configured (then nothing can be emitted either). */
export function startWebhookWorker(
  config: Config,
  deps: WebhookWorkerDeps,
): Worker<WebhookJobData, void, string> | undefined {
  const { secret, timeoutMs, allow } = config.webhooks;
  if (secret === undefined) return undefined;
  const now = deps.now ?? Date.now;
  const metrics = deps.metrics ?? noMetrics;
  const sender = new WebhookSender({
    secret,
    timeoutMs,
    now,
    ...(deps.dispatcher ? { dispatcher: deps.dispatcher } : {}),
  });

  const process = async (job: {
    data: WebhookJobData;
    attemptsMade: number;
    opts: { attempts?: number };
  }): Promise<void> => {
    const { data } = job;
    const attempt = job.attemptsMade + 1;
    const last = attempt >= (job.opts.attempts ?? 1);
    const log = deps.logger.child({
      webhookId: data.id,
      event: data.type,
      ...(data.batchId ? { batchId: data.batchId } : {}),
    });
    const note = async (
      fields: Omit<DeliveryRecord, 'id' | 'event' | 'url' | 'createdAt' | 'attempts' | 'lastAttemptAt'>,
    ) => {
      if (data.batchId === undefined) return;
      // A job of an older release carries no account: its id alone (unambiguous then) finds the batch.
      const batch = data.account !== undefined ? { id: data.batchId, account: data.account } : data.batchId;
      const before = await deps.deliveries.get(batch, data.id);
      const record: DeliveryRecord = {
        id: data.id,
        event: data.type,
        url: data.url,
        createdAt: before?.createdAt ?? now(),
        ...fields,
        attempts: attempt,
        lastAttemptAt: now(),
      };
      await deps.deliveries.update(batch, record);
    };
    const count = (result: WebhookResult) => metrics.webhook?.(data.type, result);

    if (!hostAllowed(new URL(data.url).host, allow)) {
      await note({ state: 'failed', lastError: 'the host is no longer on VQ_WEBHOOK_ALLOW: not sent' });
      count('refused');
      log.warn({ host: new URL(data.url).host }, 'webhook not sent: its host is no longer on the allow-list');
      throw new UnrecoverableError('host not allowed');
    }
    const result = await sender.send(data);
    const status = result.status !== undefined ? { lastStatus: result.status } : {};
    if (result.ok) {
      await note({ state: 'delivered', ...status, deliveredAt: now() });
      count('delivered');
      log.info({ attempt, status: result.status }, 'webhook delivered');
      return;
    }
    const error = result.error ?? 'failed';
    if (result.status === 410) {
      await note({ state: 'failed', ...status, lastError: `${error}: the receiver asks not to be sent this again` });
      count('gone');
      log.warn({ attempt, status: 410 }, 'webhook refused for good (410 Gone): not retried');
      throw new UnrecoverableError(error);
    }
    await note({ state: last ? 'failed' : 'retrying', ...status, lastError: error });
    count(last ? 'given_up' : 'retry');
    if (last) log.error({ attempt, status: result.status, error }, 'webhook given up after its last attempt');
    else log.warn({ attempt, status: result.status, error }, 'webhook delivery failed; it will be retried');
    throw new Error(error);
  };

  const worker = new Worker<WebhookJobData, void, string>(webhookQueueName(config), process, {
    connection: deps.connection,
    prefix: config.prefix,
    concurrency: CONCURRENCY,
    lockDuration: Math.max(config.locks.lockDurationMs, timeoutMs * 2),
    stalledInterval: config.locks.stalledIntervalMs,
  });
  // Connection errors are an outage the health logs once per change of state; others are logged.
  worker.on('error', (err) => {
    if (!deps.health?.outage(err)) deps.logger.error({ err }, 'webhook worker error');
  });
  return worker;
}

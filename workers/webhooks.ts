// The webhook deliveries' worker: a BullMQ Worker on `<VQ_QUEUE>.webhooks`, started in every
// worker process beside the plate workers (workers/worker.ts), with its own concurrency, so a
// receiver that is slow or down delays only its own deliveries. Each job is one (event, target):
// at least once, retried with exponential backoff (VQ_WEBHOOK_ATTEMPTS, VQ_WEBHOOK_BACKOFF) under
// the same webhook-id, its state written to the batch's delivery log after every attempt.
//
// | answer                                 | what happens                                        |
// |----------------------------------------|-----------------------------------------------------|
// | 2xx                                    | delivered                                           |
// | 410 Gone                               | given up at once (the receiver says: stop)          |
// | other status, no answer, error         | retried with backoff; failed after the last attempt |
// | host no longer on the list             | given up at once, nothing sent                      |
// | an internal address now (sender.ts)    | given up at once, no connection made                |
//
// The delivery status says a category (DELIVERY_FAILURES), never an error's words: those are
// logged at debug level only, for the operator.

import { UnrecoverableError, Worker } from 'bullmq';
import type { Logger } from 'pino';
import { clock } from '../src/clock.js';
import type { Config } from '../src/config.js';
import { noMetrics, type WebhookResult, type WorkerMetrics } from '../src/metrics.js';
import type { RedisClient } from '../src/redis/connection.js';
import type { RedisHealth } from '../src/redis/health.js';
import { annotate, SPAN, spanned, withQueueTelemetry } from '../src/telemetry/index.js';
import type { Resolve } from '../src/webhooks/address.js';
import { DELIVERY_FAILURES, type DeliveryLog, type DeliveryRecord } from '../src/webhooks/deliveries.js';
import { type WebhookJobData, webhookQueueName } from '../src/webhooks/outbox.js';
import { WebhookSender } from '../src/webhooks/sender.js';
import { hostAllowed } from '../src/webhooks/target.js';

/** Deliveries one process makes at once: each mostly waits on a receiver. */
const CONCURRENCY = 16;

export interface WebhookWorkerDeps {
  connection: RedisClient;
  deliveries: DeliveryLog;
  logger: Logger;
  metrics?: WorkerMetrics;
  /** Name resolution at connect time (default dns.lookup); tests inject the answers. */
  resolve?: Resolve;
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
  const now = deps.now ?? clock.now;
  const metrics = deps.metrics ?? noMetrics;
  const sender = new WebhookSender({
    secret,
    timeoutMs,
    allow,
    now,
    ...(deps.resolve ? { resolve: deps.resolve } : {}),
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
      await note({ state: 'failed', lastError: 'host_not_allowed' });
      count('refused');
      log.warn({ host: new URL(data.url).host }, 'webhook not sent: its host is no longer on the allow-list');
      throw new UnrecoverableError(DELIVERY_FAILURES.host_not_allowed);
    }
    const result = await spanned(SPAN.webhook, deliveryAttributes(data, attempt), async () => {
      const sent = await sender.send(data);
      annotate({ 'http.response.status_code': sent.status ?? 0, 'vqb.webhook.ok': sent.ok });
      return sent;
    });
    const status = result.status !== undefined ? { lastStatus: result.status } : {};
    if (result.ok) {
      await note({ state: 'delivered', ...status, deliveredAt: now() });
      count('delivered');
      log.info({ attempt, status: result.status }, 'webhook delivered');
      return;
    }
    const failure = result.failure ?? 'failed';
    if (result.detail !== undefined) log.debug({ attempt, failure, detail: result.detail }, 'webhook attempt error');
    if (failure === 'refused_address') {
      await note({ state: 'failed', lastError: failure });
      count('refused');
      log.warn({ attempt, failure }, 'webhook not sent: its host is or resolves to an internal address');
      throw new UnrecoverableError(DELIVERY_FAILURES[failure]);
    }
    if (failure === 'gone') {
      await note({ state: 'failed', ...status, lastError: failure });
      count('gone');
      log.warn({ attempt, status: 410 }, 'webhook refused for good (410 Gone): not retried');
      throw new UnrecoverableError(DELIVERY_FAILURES[failure]);
    }
    await note({ state: last ? 'failed' : 'retrying', ...status, lastError: failure });
    count(last ? 'given_up' : 'retry');
    if (last) log.error({ attempt, status: result.status, failure }, 'webhook given up after its last attempt');
    else log.warn({ attempt, status: result.status, failure }, 'webhook delivery failed; it will be retried');
    // BullMQ keeps this message as the job's failedReason: the category's sentence, no socket words.
    throw new Error(DELIVERY_FAILURES[failure]);
  };

  const worker = new Worker<WebhookJobData, void, string>(webhookQueueName(config), process, {
    connection: deps.connection,
    prefix: config.prefix,
    concurrency: CONCURRENCY,
    ...withQueueTelemetry(),
    lockDuration: Math.max(config.locks.lockDurationMs, timeoutMs * 2),
    stalledInterval: config.locks.stalledIntervalMs,
  });
  // Connection errors are an outage the health logs once per change of state; others are logged.
  worker.on('error', (err) => {
    if (!deps.health?.outage(err)) deps.logger.error({ err }, 'webhook worker error');
  });
  // The sender's own agents (keep-alive connections to receivers) go with the worker.
  worker.on('closed', () => {
    sender.close().catch(() => {});
  });
  return worker;
}

/** What a delivery's span carries: the event, the attempt, its batch and account; never the URL's query or the body. */
function deliveryAttributes(data: WebhookJobData, attempt: number): Record<string, string | number> {
  return {
    'vqb.webhook.event': data.type,
    'vqb.webhook.attempt': attempt,
    ...(data.batchId !== undefined ? { 'vqb.batch.id': data.batchId } : {}),
    ...(data.account !== undefined ? { 'vqb.account.id': data.account } : {}),
  };
}

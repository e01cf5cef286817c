// Emitting an event: one BullMQ job per (event, target) on the webhooks' own queue
// `<VQ_QUEUE>.webhooks` (same prefix, same hash tag), never on an account's plate queue, so a slow
// or failing receiver holds up nothing but its own deliveries. The job id is the webhook-id,
// derived from the event: whichever process notices the event first adds the job, and any other
// that notices it too adds nothing (BullMQ keeps one job per id).
import { Queue } from 'bullmq';
import { clock } from '../clock.js';
import type { Config } from '../config.js';
import type { BatchInfo, BatchKey, BatchStore } from '../queue/batch/store.js';
import type { BatchViews } from '../queue/batch/view.js';
import { type AccountPause, OPERATOR_PAUSE } from '../queue/line.js';
import type { RedisClient } from '../redis/connection.js';
import type { BatchRef, VqbKeys } from '../redis/keys.js';
import { withQueueTelemetry } from '../telemetry/index.js';
import { type Resolve, systemResolve } from './address.js';
import { DeliveryLog, type DeliveryRecord } from './deliveries.js';
import {
  accountEvent,
  batchDeadlineEvent,
  batchFinishedEvent,
  messageId,
  type WatchEventType,
  type WebhookEvent,
  type WebhookEventType,
} from './events.js';
import { checkCallbackTarget } from './target.js';

export const WEBHOOK_JOB = 'webhook';

export interface WebhookJobData {
  /** The webhook-id (also the job id). */
  id: string;
  type: WebhookEventType;
  url: string;
  /** The batch whose status shows this delivery, when it is for a batch. */
  batchId?: string;
  /** That batch's account (a batch id is scoped by its account). */
  account?: string;
  /** The payload, fixed when the event is emitted: every attempt sends the same bytes. */
  body: string;
}

export function webhookQueueName(config: Pick<Config, 'queueName'>): string {
  return `${config.queueName}.webhooks`;
}

/** Finished delivery jobs are kept this long: an event noticed again within it is not sent again. */
const KEEP_SECONDS = 7 * 86_400;

export class WebhookOutbox {
  readonly deliveries: DeliveryLog;
  readonly #config: Config;
  readonly #redis: RedisClient;
  readonly #batches: BatchStore;
  readonly #views: BatchViews;
  readonly #now: () => number;
  readonly #resolve: Resolve;
  #queue: Queue<WebhookJobData, unknown, string> | undefined;

  constructor(
    config: Config,
    redis: RedisClient,
    keys: VqbKeys,
    batches: BatchStore,
    views: BatchViews,
    now: () => number = clock.now,
    resolve: Resolve = systemResolve,
  ) {
    this.#config = config;
    this.#resolve = resolve;
    this.#redis = redis;
    this.#batches = batches;
    this.#views = views;
    this.#now = now;
    this.deliveries = new DeliveryLog(redis, keys, (id) => batches.find(id));
  }

  /**
   * A tenant's callbackUrl as it will be stored, its host name resolved and every address judged
   * (target.ts): throws InputError (CALLBACK_ADDRESS_FORBIDDEN, CALLBACK_HOST_UNRESOLVED, …).
   */
  checkTarget(raw: string): Promise<string> {
    return checkCallbackTarget(raw, this.#config.webhooks, this.#resolve);
  }

  /** Opened on first use: most processes that open the services never emit anything. */
  get queue(): Queue<WebhookJobData, unknown, string> {
    if (this.#queue !== undefined) return this.#queue;
    this.#queue = new Queue<WebhookJobData, unknown, string>(webhookQueueName(this.#config), {
      connection: this.#redis,
      prefix: this.#config.prefix,
      defaultJobOptions: {
        attempts: this.#config.webhooks.attempts,
        backoff: { type: 'exponential', delay: this.#config.webhooks.backoffMs },
        removeOnComplete: { age: KEEP_SECONDS },
        removeOnFail: { age: KEEP_SECONDS },
      },
      ...withQueueTelemetry(),
    });
    // A failed add() reaches its caller, and the connection's own watcher logs outages once per
    // change of state: without a listener BullMQ would print every reconnect error to stderr.
    // Added once, with the queue: a listener per access grew by one a webhook sent.
    this.#queue.on('error', () => {});
    return this.#queue;
  }

  /**
   * The batch finished: its callbackUrl, if it has one, gets `batch.finished`. Safe to call from
   * every process that sees the batch finish (and again after a crash): one delivery per finish.
   * A batch finished again after a retry of its failed plates is a new event.
   */
  async batchFinished(batch: BatchKey): Promise<string | undefined> {
    const info = await this.#views.get(batch);
    const url = info.callbackUrl;
    if (url === undefined || info.finishedAt === undefined) return undefined;
    const event = batchFinishedEvent({ ...info, finishedAt: info.finishedAt }, this.#config.webhooks.publicUrl);
    const id = messageId('batch.finished', info.id, String(info.finishedAt), url);
    await this.#send(id, event, url, info);
    return id;
  }

  /**
   * The deadline watch saw the batch's projected finish pass its deadline (`batch.at_risk`) or come
   * back in time (`batch.back_on_track`), at `at`: told to its callbackUrl and VQ_WEBHOOK_URL. The
   * id covers the turn's instant, so the same turn noticed twice is one delivery.
   */
  async batchDeadline(
    type: 'batch.at_risk' | 'batch.back_on_track',
    info: BatchInfo & { deadline: number },
    projection: { expected?: number; low?: number; high?: number; slackMs?: number },
    at: number,
  ): Promise<string[]> {
    const { publicUrl, url: globalUrl } = this.#config.webhooks;
    const event = batchDeadlineEvent(type, info, projection, at, publicUrl);
    const ids: string[] = [];
    for (const url of [info.callbackUrl, globalUrl]) {
      if (url === undefined) continue;
      const id = messageId(type, info.account, info.id, String(at), url);
      await this.#send(id, event, url, url === info.callbackUrl ? info : undefined);
      ids.push(id);
    }
    return ids;
  }

  /**
   * The batch exists and is given another callbackUrl (its content sent again with one, `vqb run
   * --notify` resuming it): stored, and if the batch has finished already, the new receiver is
   * told now (a new delivery: the id covers the receiver).
   */
  async retarget(batch: BatchRef, raw: string): Promise<void> {
    const info = await this.#views.get(batch);
    if (info.callbackUrl === raw) return;
    // Every door that gives a batch a new receiver comes here: judged as a new batch's would be.
    const url = await this.checkTarget(raw);
    await this.#batches.setCallbackUrl(batch, url);
    if (info.finishedAt !== undefined) await this.batchFinished(batch);
  }

  /**
   * A key-level failure paused the account: every unfinished batch of the account with a
   * callbackUrl gets `account.paused` (a person must act before it can finish), and so does
   * VQ_WEBHOOK_URL. Returns the webhook-ids.
   */
  async accountPaused(accountId: string, pause: AccountPause, onlyNew = false): Promise<string[]> {
    return this.#toAccountTargets(accountId, pause, undefined, onlyNew);
  }

  /**
   * The pause of a key failure was lifted (`vqb resume`, `vqb run` trying again): the same
   * receivers as its account.paused learn that the batches go on. An operator's own pause and
   * resume send nothing.
   */
  async accountResumed(accountId: string, lifted: AccountPause | undefined): Promise<string[]> {
    if (lifted === undefined || lifted.code === OPERATOR_PAUSE) return [];
    return this.#toAccountTargets(accountId, lifted, this.#now(), false);
  }

  /** Every unfinished batch of the account with a callbackUrl, and VQ_WEBHOOK_URL. */
  async #toAccountTargets(
    accountId: string,
    pause: AccountPause,
    resumedAt: number | undefined,
    onlyNew: boolean,
  ): Promise<string[]> {
    const { publicUrl, url: globalUrl } = this.#config.webhooks;
    const type = resumedAt === undefined ? 'account.paused' : 'account.resumed';
    const ids: string[] = [];
    const { batches } = await this.#views.list(0, Number.MAX_SAFE_INTEGER, [accountId]);
    for (const info of batches) {
      const url = info.callbackUrl;
      if (info.finishedAt !== undefined || url === undefined) continue;
      const id = messageId(type, accountId, String(pause.at), info.id, url);
      if (onlyNew && (await this.deliveries.get(info, id)) !== undefined) continue;
      await this.#send(id, accountEvent(accountId, pause, info.id, publicUrl, resumedAt), url, info);
      ids.push(id);
    }
    if (globalUrl !== undefined) {
      const id = messageId(type, accountId, String(pause.at), '', globalUrl);
      // No delivery log without a batch: BullMQ's job (kept 7 days) is the record.
      if (onlyNew && (await this.queue.getJobState(id)) !== 'unknown') return ids;
      await this.#send(id, accountEvent(accountId, pause, undefined, publicUrl, resumedAt), globalUrl, undefined);
      ids.push(id);
    }
    return ids;
  }

  /**
   * Emits what a process that crashed at the wrong moment (after the batch finished or the account
   * paused, before its job was added) left unsent: the newest `limit` batches, and every account
   * paused by a key failure. Everything it emits has its derived id, so what was sent is not sent
   * again. Returns the webhook-ids it added.
   */
  async sweep(pauses: readonly { account: string; pause: AccountPause }[], limit = 50): Promise<string[]> {
    const added: string[] = [];
    const { batches } = await this.#views.list(0, limit);
    for (const info of batches) {
      if (info.finishedAt === undefined || info.callbackUrl === undefined) continue;
      const id = messageId('batch.finished', info.id, String(info.finishedAt), info.callbackUrl);
      if ((await this.deliveries.get(info, id)) !== undefined) continue;
      if ((await this.batchFinished(info)) === id) added.push(id);
    }
    for (const { account, pause } of pauses) added.push(...(await this.accountPaused(account, pause, true)));
    return added;
  }

  /**
   * A watch list's event (plate.changed, watch.round_finished), built by the watch: one delivery
   * per id (emitted again after a crash: the same job, not a second), logged with the round's
   * batch. `url` was judged when the watch was stored.
   */
  async emit(id: string, event: WebhookEvent<WatchEventType>, url: string, batch: BatchRef): Promise<void> {
    await this.#send(id, event, url, batch);
  }

  async #send(id: string, event: WebhookEvent, url: string, batch: BatchRef | undefined): Promise<void> {
    if (batch !== undefined) {
      const record: DeliveryRecord = {
        id,
        event: event.type,
        url,
        state: 'pending',
        attempts: 0,
        createdAt: this.#now(),
      };
      await this.deliveries.emitted(batch, record);
    }
    const data: WebhookJobData = {
      id,
      type: event.type,
      url,
      ...(batch !== undefined ? { batchId: batch.id, account: batch.account } : {}),
      body: JSON.stringify(event),
    };
    await this.queue.add(WEBHOOK_JOB, data, { jobId: id });
  }

  async close(): Promise<void> {
    await this.#queue?.close();
  }
}

// Turns the scheduler's picks into BullMQ jobs, a few at a time: each account's queue holds about
// half a second of its rate in creates, so a batch that arrives now is served within that, and a
// million plates queued cost a million list entries, not a million jobs. Every worker process
// runs the feeder on a timer for the accounts with work (the scheduler's active set); producers
// call it once after an ingest so an interactive plate is on the queue at once. A feed is one
// script (sched-feed): what is queued, what to pick, and whether the account has nothing left.
import { type Account, perSecond } from '../accounts/account.js';
import { clock } from '../clock.js';
import { queueKeys } from '../engine/bullmq/keys.js';
import type { RedisClient } from '../redis/connection.js';
import { keepSubscribed } from '../redis/heard.js';
import type { VqbKeys } from '../redis/keys.js';
import { jobMetadataOf, recordWait, tracing } from '../telemetry/index.js';
import { createPriority, freshPriority, JOB_NAME, jobIdFor, newJobData, type PlateQueue } from './account-queues.js';
import type { Accounts } from './accounts.js';
import type { InFlight } from './inflight.js';
import type { PlateTraces } from './plate-traces.js';
import type { KeyPools } from './pool.js';
import { type DeadlinePace, lentOf, type Picked, type Scheduler } from './scheduler.js';

/** Why a plate waited in the scheduler (its wait span's `vqb.wait.reason`), weakest first. */
const WAIT_WHY = ['pace', 'share', 'deadline', 'hold', 'first_contact'] as const;
type WaitWhy = (typeof WAIT_WHY)[number];

/** BullMQ's telemetry option of a job that carries its plate's trace (bullmq-otel's metadata). */
function withMetadata(metadata: string | undefined): { telemetry?: { metadata: string } } {
  return metadata === undefined ? {} : { telemetry: { metadata } };
}

/** Staged picks older than this lost their feeder in a crash: their jobs are added again (a no-op when they exist). */
const STAGED_STALE_MS = 30_000;

/** Interactive plates fed per feed call at most, whatever the queue holds (VQ_INTERACTIVE_MAX is at most 500). */
const INTERACTIVE_AT_ONCE = 500;

/** The longest a process leaves a busy account unfed after a feed that found its queue full. */
const REST_MAX_MS = 2_000;

/** Requests a plate takes as deadlines are weighed (a create and its poll, and a tenth of them a second poll). */
const REQUESTS_PER_PLATE = 2.15;

/** How long the upstream's answer time read (the poll learner's first-poll wait) is trusted. */
const ANSWER_READ_MS = 10_000;

/** The upstream's answer time for a product: the poll learner's wait before a first poll, ms. */
export interface AnswerTime {
  /** The wait in force: the prior, first contact's seed or what answers taught (deadlines weigh it). */
  firstPollDelay(product: string): Promise<number>;
  /** The same once answers moved it, else undefined (the closing creates weigh only that). */
  learnedDelay(product: string): Promise<number | undefined>;
}

/** Whether the account still meets its upstream (queue/answers.ts AnswerBook.meeting). */
export type Meeting = (account: Account) => Promise<boolean>;

/**
 * What a feed did: plates it made jobs, whether the account is idle, the jobs waiting on its queue
 * and how long no Worker may take them (Feed).
 */
export interface FeedResult {
  fed: number;
  idle: boolean;
  /**
   * The account meets its upstream (first contact) and its one plate is out: nothing more is fed
   * until that plate is read, and whoever reads it feeds and wakes every process (a feed pass
   * before then would only find no room).
   */
  meeting?: boolean;
  waiting: number;
  limitedMs: number;
}

export class Feeder {
  readonly #scheduler: Scheduler;
  readonly #accounts: Pick<Accounts, 'for'>;
  readonly #inflight: InFlight;
  readonly #now: () => number;
  /** The pools of keys (queue/pool.ts), set once built (services.ts); none: every account serves. */
  pools: Pick<KeyPools, 'serving'> | undefined;
  /** Tracing on: where plates' trace contexts wait (queue/plate-traces.ts), set once built (services.ts). */
  traces: PlateTraces | undefined;
  readonly #lastWhy = new Map<string, WaitWhy>();
  /** Where the wake channel is published (none in unit tests that only compute rests). */
  readonly #wake: { redis: RedisClient; keys: VqbKeys } | undefined;
  readonly #answerTime: AnswerTime | undefined;
  readonly #answers = new Map<string, { ms: number; at: number }>();
  readonly #meeting: Meeting | undefined;
  /**
   * Batches whose creates are closing (#closing), until when: their polls yield to creates in the
   * worker's line (closingUntil).
   */
  readonly #closingUntil = new Map<string, number>();
  /**
   * Set by a worker process, whose polls ask closingUntil: a producer's process (an API, an ingest)
   * feeds too, and would read the batches' lists and the answer time for nobody.
   */
  marksClosing = false;

  constructor(
    scheduler: Scheduler,
    accounts: Pick<Accounts, 'for'>,
    inflight: InFlight,
    now: () => number = clock.now,
    wake?: { redis: RedisClient; keys: VqbKeys },
    answerTime?: AnswerTime,
    meeting?: Meeting,
  ) {
    this.#scheduler = scheduler;
    this.#accounts = accounts;
    this.#inflight = inflight;
    this.#now = now;
    this.#wake = wake;
    this.#answerTime = answerTime;
    this.#meeting = meeting;
  }

  /**
   * What the feed weighs deadlines with: a plate's requests at the rate in force, and in reserve
   * the last plate's answer (one and a half times the learned answer time) and two seconds of
   * feeding and pacing (docs/plans.md). The answer time is read at most every 10 s per product.
   */
  async #deadlinePace(account: Account, ratePerSecond: number): Promise<DeadlinePace> {
    let answerMs = 0;
    if (this.#answerTime) {
      const now = this.#now();
      const known = this.#answers.get(account.product);
      if (known && now - known.at < ANSWER_READ_MS) answerMs = known.ms;
      else {
        answerMs = await this.#answerTime.firstPollDelay(account.product);
        this.#answers.set(account.product, { ms: answerMs, at: now });
      }
    }
    return { msPerPlate: (REQUESTS_PER_PLATE * 1_000) / ratePerSecond, reserveMs: answerMs * 1.5 + 2_000 };
  }

  /**
   * A producer's feed (an ingest, a rerun) tells the worker processes it put jobs on the
   * account's queue: a Worker of theirs that waits for work fetches at once (workers/doorbell.ts),
   * not at the process's next feed pass, which for a slow account may be 2 s off (REST_MAX_MS).
   * One PUBLISH per producer feed that left the account with work, even when it added no job (a
   * cap's hold): the worker processes know the accounts with work from these wakes
   * (workers/known-active.ts), and would not feed that account when the hold is let go. Their own
   * feeds do not publish: each rings its own Workers, and every process feeds every busy account.
   */
  async feedAndWake(accountId: string, fresh?: string): Promise<FeedResult> {
    const fed = await this.feed(accountId, undefined, fresh);
    if (fed.fed > 0 || !fed.idle) await this.#wakeWorkers(accountId);
    return fed;
  }

  /**
   * Jobs went on the account's queue outside the scheduler (a rerun's polls): it joins the active
   * set, and the worker processes are woken. They keep that set from their wakes
   * (workers/known-active.ts) and would otherwise find the account only at their next read of it.
   */
  async activateAndWake(accountId: string): Promise<void> {
    await this.#scheduler.activate([accountId]);
    await this.#wakeWorkers(accountId);
  }

  /** One PUBLISH on the wake channel naming the account (none without a channel: unit tests). */
  async #wakeWorkers(accountId: string): Promise<void> {
    if (this.#wake) await this.#wake.redis.publish(this.#wake.keys.wake, accountId);
  }

  /**
   * Listens on the wake channel with `subscriber` (a connection of its own: a subscribed
   * connection takes no other command); `onWake` gets the account id of each wake. False when
   * nothing is sent here (no wake channel: unit tests that only compute rests).
   *
   * `onStanding` is told when the subscription stands and when its connection closes
   * (redis/heard.ts keepSubscribed): wakes published meanwhile are lost, so a listener that keeps
   * state from wakes reads it again once the subscription stands.
   */
  async listen(
    subscriber: RedisClient,
    onWake: (accountId: string) => void,
    onStanding?: (standing: boolean) => void,
  ): Promise<boolean> {
    if (!this.#wake) return false;
    const channel = this.#wake.keys.wake;
    subscriber.on('message', (from: string, accountId: string) => {
      if (from === channel) onWake(accountId);
    });
    await keepSubscribed(subscriber, channel, (standing) => onStanding?.(standing));
    return true;
  }

  /**
   * Creates an account keeps on its queue: half a second of its rate (at least 4), a little more
   * than one feed period needs. `ratePerSecond` is the rate in force when the caller knows it (a
   * learned rate, `auto`); else the configured one (for `auto`, where it starts).
   */
  target(account: Account, ratePerSecond = perSecond(account)): number {
    return Math.min(1_000, Math.max(4, Math.ceil(ratePerSecond * 0.5)));
  }

  /**
   * How long a process may leave the account unfed after a feed that added nothing (its queue
   * held its target): a quarter of the time that queue lasts at the account's rate, at least
   * `everyMs` (the feed period) and at most 2 s. A slow account's queue holds many seconds of its
   * creates (4 creates are 20 s at 12/min), so feeding it every 200 ms from every process only
   * loaded Redis (issue 21: 1,000 busy accounts, four processes, about 12,500 feeds a second, four
   * fifths of Redis's commands, and the bursts delayed the pacing calls behind them); an account
   * at 8/s or more is still fed every period. Interactive plates do not wait for it: the producer
   * feeds the account once its ingest is stored.
   */
  restMs(accountId: string, ratePerSecond: number | undefined, everyMs: number): number {
    const { account } = this.#accounts.for(accountId);
    const rate = ratePerSecond ?? perSecond(account);
    const lastsMs = (this.target(account, rate) / rate) * 1_000;
    return Math.min(REST_MAX_MS, Math.max(everyMs, lastsMs / 4));
  }

  /**
   * Puts every interactive plate on the queue at once (a person waits; they go before anything
   * queued, and they are few), then tops the account's queue up to its target with the others;
   * while the account's creates are held at a spending cap it feeds none, since they would only
   * sleep as delayed jobs (the feed's script reads the hold). Returns how many plates became
   * jobs, how many jobs wait on the queue now, and whether the account had nothing left and left
   * the active set. `fresh`: a normal batch just submitted, whose first plate goes on the queue
   * now, full or not, at a poll's priority (account-queues.ts freshPriority).
   */
  async feed(accountId: string, ratePerSecond?: number, fresh?: string): Promise<FeedResult> {
    const { account, queue, line } = this.#accounts.for(accountId);
    const pace = await this.#deadlinePace(account, ratePerSecond ?? perSecond(account));
    // A key of a pool that holds takes nothing, and its pooled plates go to the other keys (queue/pool.ts).
    const serving = this.pools === undefined || (await this.pools.serving(accountId));
    // An account that meets its upstream sends one create at a time (workers/flow.ts): one plate
    // is fed, interactive or not, and the others wait in the scheduler, costing nothing, until first
    // contact ends (whoever ends it feeds at once: workers/first-contact.ts). Fed all at once,
    // each would be refused and go round the queue every 250 ms: 2,000 Redis commands a second
    // for the first 15 s of a cold deployment (issue 43).
    const meeting = this.#meeting !== undefined && (await this.#meeting(account));
    const cap = this.#inflight.capOf(accountId);
    const { picked, idle, waiting, limitedMs, left, othersWaiting } = await this.#scheduler.feed(
      accountId,
      queueKeys(queue),
      meeting ? { ...cap, cap: 1, strict: true } : cap,
      line.capHold,
      serving ? INTERACTIVE_AT_ONCE : 0,
      serving ? this.target(account, ratePerSecond) : 0,
      this.#now(),
      pace,
      fresh,
    );
    const why =
      this.traces === undefined || !tracing()
        ? 'pace'
        : await this.#waitWhy(account.id, meeting, !serving || limitedMs > 0, picked);
    if (!meeting && this.marksClosing && othersWaiting === 0)
      await this.#closing(account, picked, left, ratePerSecond ?? perSecond(account));
    await this.#add(account, queue, picked, why, fresh);
    return { fed: picked.length, idle, waiting, limitedMs, ...(meeting ? { meeting } : {}) };
  }

  /** Adds the jobs of picks whose feeder died before it could. */
  async recover(accountId: string): Promise<number> {
    const stale = await this.#scheduler.staleStaged(accountId, STAGED_STALE_MS, this.#now());
    const { account, queue } = this.#accounts.for(accountId);
    await this.#add(account, queue, stale);
    return stale.length;
  }

  /**
   * Tracing: why the account's plates waited in the scheduler, as seen at this feed and the one
   * before (the stronger of the two): first contact, a hold (a 429's, a spending cap's, a pool's),
   * a deadline batch going first, batches sharing the account, or else the account's pace.
   */
  async #waitWhy(accountId: string, meeting: boolean, held: boolean, picked: readonly Picked[]): Promise<WaitWhy> {
    const seen: WaitWhy = meeting
      ? 'first_contact'
      : held
        ? 'hold'
        : (await this.#scheduler.deadlines(accountId)).length > 0
          ? 'deadline'
          : new Set(picked.map((p) => p.batchId)).size > 1
            ? 'share'
            : 'pace';
    const before = this.#lastWhy.get(accountId) ?? 'pace';
    this.#lastWhy.set(accountId, seen);
    return WAIT_WHY.indexOf(seen) >= WAIT_WHY.indexOf(before) ? seen : before;
  }

  /** Tracing: each picked plate's wait in the scheduler, ended now; what its job carries on (BullMQ's metadata). */
  async #waits(account: Account, picked: readonly Picked[], why: WaitWhy): Promise<Map<string, string>> {
    const out = new Map<string, string>();
    if (this.traces === undefined || !tracing() || picked.length === 0) return out;
    const byBatch = new Map<string, Picked[]>();
    for (const p of picked) byBatch.set(p.batchId, [...(byBatch.get(p.batchId) ?? []), p]);
    for (const [listed, plates] of byBatch) {
      const lent = lentOf(listed);
      const batch = { id: lent?.batchId ?? listed, account: lent?.home ?? account.id };
      const carried = await this.traces.take(
        batch,
        plates.map((p) => p.plate),
      );
      for (const [plate, { traceparent, since }] of carried) {
        const waited = recordWait(traceparent, since, {
          'vqb.wait.reason': why,
          'vqb.wait.ms': Math.max(0, this.#now() - since),
          'vqb.account.id': account.id,
          'vqb.batch.id': batch.id,
        });
        if (waited !== undefined) out.set(jobIdFor(batch.id, plate), jobMetadataOf(waited));
      }
    }
    return out;
  }

  /**
   * Marks the normal batches among `picked` whose creates are closing: no more wait to be fed, all
   * of them together and with no other normal batch waiting (the feed's `othersWaiting`), than
   * the key sends in one answer time (its rate times the first-poll delay). Until twice that
   * answer time after the last such feed, their polls yield to creates in the worker's line
   * (closingUntil): polls first kept a batch's paid, unread queries near its rate times the answers'
   * time, and at the end left the key half idle for the last creates' answer time, those creates
   * having come last with only their polls left (1-1.5 s of a 300-plate batch at 30/s). Created
   * first, the polls they passed fill that time. What each batch has left is the feed's own
   * reply (`left`: an LLEN of its list in the feed's script, where it was a round trip a feed of
   * its own, 0.16 commands a plate), and the answer time as the poll learner holds it (read at
   * most once a second: the 10 s that deadlines may wait for it would read the cold 15 s prior
   * just after first contact), once answers taught it: none is closing before. A pooled batch's
   * plates taken from its home's list are left as they are.
   */
  async #closing(
    account: Account,
    picked: readonly Picked[],
    left: ReadonlyMap<string, number>,
    ratePerSecond: number,
  ): Promise<void> {
    if (this.#answerTime === undefined) return;
    // Marks past their time go here, once a feed: a batch's polls stop asking once it ends.
    const now = this.#now();
    for (const [id, until] of this.#closingUntil) if (until <= now) this.#closingUntil.delete(id);
    const normal = new Set(picked.filter((p) => p.cls === 'normal').map((p) => p.batchId));
    const batches = [...normal].filter((id) => !lentOf(id));
    if (batches.length === 0) return;
    // Not on a guess: the seed (twice one answer) would close a batch before its first poll was
    // due, and its polls, yielding, would never teach the schedule (PollLearner.learnedDelay).
    const answerMs = await this.#answerTime.learnedDelay(account.product);
    if (answerMs === undefined) return;
    const within = Math.ceil((ratePerSecond * answerMs) / 1_000);
    // The account's creates all together, not each batch's: beside a batch with more to send, the
    // key stays busy without the yield, and a batch closing early only waited. A 1-plate batch
    // (closing at its only feed) beside a 5,000-plate one had its poll yield to the other's
    // creates for twice an answer time: `--only interactive`'s normal batch, 12.9 s for one plate.
    let all = 0;
    for (const id of normal) all += left.get(id) ?? Number.POSITIVE_INFINITY;
    if (all > within) return;
    for (const id of batches) this.#closingUntil.set(id, now + 2 * answerMs);
  }

  /** Until when the batch's polls yield to creates (#closing), the clock's now(); undefined when they do not now. */
  closingUntil(batchId: string): number | undefined {
    const until = this.#closingUntil.get(batchId);
    return until !== undefined && until > this.#now() ? until : undefined;
  }

  async #add(
    account: Account,
    queue: PlateQueue,
    picked: readonly Picked[],
    why: WaitWhy = 'pace',
    fresh?: string,
  ): Promise<void> {
    if (picked.length === 0) return;
    const carried = await this.#waits(account, picked, why);
    const first = fresh === undefined ? -1 : picked.findIndex((p) => p.batchId === fresh && p.cls === 'normal');
    await queue.addBulk(
      picked.map((p, i) => {
        // A pooled batch's plate taken by this key from its home's list: the job runs on this
        // key's queue, and its outcome goes to the batch where it lives.
        const lent = lentOf(p.batchId);
        const batchId = lent?.batchId ?? p.batchId;
        const data = newJobData(account, batchId, p.plate, p.cls);
        return {
          name: JOB_NAME,
          data: lent ? { ...data, account: lent.home, key: account.id } : data,
          opts: {
            jobId: jobIdFor(batchId, p.plate),
            priority: i === first ? freshPriority() : createPriority(p.cls),
            ...withMetadata(carried.get(jobIdFor(batchId, p.plate))),
          },
        };
      }),
    );
    await this.#scheduler.unstage(account.id, picked);
  }
}

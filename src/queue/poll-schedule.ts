// When to poll a query. Polls cost the same quota as creates, so the aim is one poll per plate:
// the first poll is placed at the q-quantile of the time queries take to finish (q = 0.9 by
// default), learned online and shared by every worker in Redis. The learner needs no completion
// timestamps from the upstream: each first poll is a yes/no sample ("finished by x?"), and the
// update below (stochastic quantile approximation, in log space) settles where a share q of first
// polls find the query finished. Many queries are in flight at once, so most samples were
// scheduled under an older estimate; a sample only moves the estimate when it was taken near it
// (within a factor e^RELEVANCE), which keeps a burst of stale samples from overshooting.
// Later polls back off exponentially up to a cap.

import { type Clock, clock } from '../clock.js';
import type { Config } from '../config.js';
import type { RedisClient } from '../redis/connection.js';
import type { VqbKeys } from '../redis/keys.js';
import { type Scripted, withScripts } from '../redis/scripts.js';
import { backoffDelay } from '../upstream/timing.js';

export type PollSettings = Config['poll'];

/** Bounds the learned first-poll delay: never below 50 ms, never past half the deadline. */
export function firstPollBounds(poll: PollSettings): { minMs: number; maxMs: number } {
  return { minMs: 50, maxMs: Math.max(50, Math.floor(poll.deadlineMs / 2)) };
}

/**
 * The change in log(delay) after one first poll. Pending → later by η·q; finished → earlier by
 * η·(1−q). In equilibrium a share (1−q) of first polls find the query pending.
 */
export function learnStep(pendingAtFirstPoll: boolean, quantile: number, eta = 0.15): number {
  return pendingAtFirstPoll ? eta * quantile : -eta * (1 - quantile);
}

/** Wait before poll number `pollsSoFar + 1`, after `pollsSoFar` polls found the query pending. */
export function nextPollDelay(pollsSoFar: number, poll: PollSettings, random: () => number = Math.random): number {
  return backoffDelay(Math.max(0, pollsSoFar - 1), poll.intervalMs, poll.maxIntervalMs, random);
}

/**
 * When the upstream's answer says how long the query took (`completedAt` − `createdAt`, both its
 * own clock: no skew), in ms; undefined when it does not say. A first poll that found the query
 * finished is then a sample at the estimate in force whenever it was taken (finished if the query
 * took no longer, pending if it took longer), so it never goes stale: an estimate that started
 * too late (VQ_POLL_INITIAL is the slow end of the answers) comes down in one round instead of a
 * quarter a round, and without undershooting.
 */
export function answeredWithin(body: unknown): number | undefined {
  if (typeof body !== 'object' || body === null) return undefined;
  const { createdAt, completedAt } = body as { createdAt?: unknown; completedAt?: unknown };
  const time = (v: unknown) => (typeof v === 'string' ? Date.parse(v) : typeof v === 'number' ? v : Number.NaN);
  const took = time(completedAt) - time(createdAt);
  return Number.isFinite(took) && took >= 0 ? took : undefined;
}

/**
 * First contact (workers/first-contact.ts): the one plate in flight while an account meets its
 * upstream is polled early and often, so that meeting costs one answer time, not the slow end of
 * the answers (VQ_POLL_INITIAL, 15 s). Its first poll comes this soon after the create; each
 * later one after half the time elapsed (at least this long, at most FIRST_CONTACT_GAP_MS) within
 * the first FIRST_CONTACT_CLOSE_MS, so an answer of 1-3 s is read within 0.6 s of it (8 polls to
 * 3.5 s); then after as long again as has elapsed (8, 16 s): an answer of 5-15 s costs 9-11 polls
 * once per upstream, which a first batch of 20 plates at two requests a plate pays within 2.5.
 */
export const FIRST_CONTACT_POLL_MS = 250;
const FIRST_CONTACT_CLOSE_MS = 3_500;
/**
 * The second create must go out within one answer time + 1 s of the first (issue 43): the poll that
 * reads the answer, its round trip and the second create's admission share that second. Polls a
 * second apart read 2.8 s answers at 3.5 s, and a CI run's second create went 1.01 s late.
 */
const FIRST_CONTACT_GAP_MS = 600;

/** Wait before the next poll of the first-contact plate, `elapsedMs` after its create. */
export function firstContactPollDelay(elapsedMs: number): number {
  const close = elapsedMs < FIRST_CONTACT_CLOSE_MS;
  return Math.round(Math.max(FIRST_CONTACT_POLL_MS, close ? Math.min(elapsedMs / 2, FIRST_CONTACT_GAP_MS) : elapsedMs));
}

/**
 * Where the first plate's answer time `tookMs` starts the estimate: one sample says little of the
 * answers' spread, and a first poll too early is paid for again while one too late only waits. It
 * starts at twice that sample (answers of 1-3 s: 2-6 s, within the 8 s a poll may wait in the
 * worker instead of BullMQ's delayed set, whose round trips cost Redis about 25 commands a poll),
 * and at VQ_POLL_INITIAL, the configured slow end, once the sample is a third of it or more
 * (answers of 5-15 s start at 15 s, so a first batch's plates are polled once each: 2.5 requests
 * a plate at most, issue 36). Never sooner than 1.25 times the sample. Answer times the upstream
 * states bring it to their 90 % point once STATED_NEEDED of them are kept.
 */
export function seedMs(tookMs: number, initialMs: number): number {
  return Math.max(tookMs * SEED_LEAST, tookMs * 3 >= initialMs ? initialMs : tookMs * 2);
}
const SEED_LEAST = 1.25;

/** The first samples move the estimate this many times further, falling to 1 over GAIN_OVER samples. */
export const FIRST_GAIN = 4;
export const GAIN_OVER = 24;

/**
 * Answer times the upstream stated (answeredWithin) kept per product, and how many are needed
 * before their quantile is the estimate (measured rather than learned).
 */
export const STATED_KEPT = 64;
export const STATED_NEEDED = 8;

/** The gain of the `n`-th sample (0-based) the estimate takes: FIRST_GAIN at first, 1 from GAIN_OVER on. */
export function sampleGain(n: number): number {
  return Math.max(1, FIRST_GAIN - ((FIRST_GAIN - 1) * n) / GAIN_OVER);
}

/** A sample taken at elapsed x informs the estimate θ only if x ≥ θ·e^-R (pending) or x ≤ θ·e^R (finished). */
export const RELEVANCE = 0.3;

/** Whether a first poll at `elapsedMs` says anything about the current estimate `estimateMs`. */
export function isRelevant(pendingAtFirstPoll: boolean, elapsedMs: number, estimateMs: number): boolean {
  const gap = Math.log(Math.max(1, elapsedMs) / estimateMs);
  return pendingAtFirstPoll ? gap >= -RELEVANCE : gap <= RELEVANCE;
}

/**
 * A first poll found the query pending: the next one goes at the q-quantile of the stated answer
 * times longer than the time elapsed, this much later (our create's instant is not the upstream's:
 * its answer's round trip).
 */
const AGAIN_SLACK_MS = 100;

/**
 * A query pending past every answer time kept is polled again after this share of its age: it
 * is due any moment (its first poll went late, after the answers' slow end: polls yield to a
 * closing batch's creates) or slower than any seen, and then one poll more costs little before
 * the backoff. Without it, such a plate waited a whole VQ_POLL_INTERVAL: with answers of 1-2 s, 64
 * kept and a first poll at 1,971 ms, none was longer one time in seven.
 */
const PAST_EVERY_SHARE = 0.1;

/**
 * The wait before the second poll of a query a first poll found pending `elapsedMs` after its
 * create, from `statedMs` (answer times the upstream stated, any order): the q-quantile of those
 * longer than `elapsedMs`, less the time elapsed; when none took longer, a tenth of the time
 * elapsed (PAST_EVERY_SHARE), at least AGAIN_SLACK_MS; undefined when none is kept.
 */
export function pendingPollDelay(statedMs: readonly number[], elapsedMs: number, quantile: number): number | undefined {
  if (statedMs.length === 0) return undefined;
  const longer = statedMs.filter((ms) => ms > elapsedMs).sort((a, b) => a - b);
  if (longer.length === 0) return Math.round(Math.max(AGAIN_SLACK_MS, elapsedMs * PAST_EVERY_SHARE));
  const at = longer[Math.max(0, Math.ceil(quantile * longer.length) - 1)]!;
  return Math.round(at - elapsedMs + AGAIN_SLACK_MS);
}

/**
 * First-poll samples are sent together at most this often, one script call for all of them: one
 * call a plate was one of the steps of a plate's path (issue 21). The estimate moves at most this
 * much later; samples not sent when a process dies are lost, as a sample taken there never was.
 */
const OBSERVE_EVERY_MS = 500;

export interface LearnedSchedule {
  firstPollMs: number;
  samples: number;
  pendingAtFirstPoll: number;
}

/**
 * The first-poll delay, stored as log(delay / initial) so a fresh key means "the configured
 * initial delay" and concurrent updates are a single HINCRBYFLOAT. Reads are cached briefly:
 * one Redis read per second per process, not one per create.
 */
export class PollLearner {
  readonly #redis: Scripted<'learn-observe'>;
  readonly #keys: VqbKeys;
  readonly #poll: PollSettings;
  /** The process's clock (services.ts): its now, and the timer that sends the samples gathered. */
  readonly #clock: Pick<Clock, 'now' | 'setTimeout' | 'clearTimeout'>;
  /** `learned`: the delay has moved on answers (a first poll's sample), not only the prior or a seed. */
  readonly #cache = new Map<string, { at: number; ms: number; learned: boolean }>();
  /** The answer times the upstream stated, read at most once a second per product. */
  readonly #stated = new Map<string, { at: number; ms: number[] }>();
  /** Samples not sent yet, by product: log(elapsed / initial) and whether the query was pending. */
  readonly #samples = new Map<string, (number | string)[]>();
  #sending: NodeJS.Timeout | undefined;
  #flushing: Promise<void> = Promise.resolve();

  constructor(
    redis: RedisClient,
    keys: VqbKeys,
    poll: PollSettings,
    time: Pick<Clock, 'now' | 'setTimeout' | 'clearTimeout'> = clock,
  ) {
    this.#redis = withScripts(redis, ['learn-observe']);
    this.#keys = keys;
    this.#poll = poll;
    this.#clock = time;
  }

  #now(): number {
    return this.#clock.now();
  }

  #fromOffset(offset: number): number {
    const { minMs, maxMs } = firstPollBounds(this.#poll);
    return Math.min(maxMs, Math.max(minMs, Math.round(this.#poll.initialMs * Math.exp(offset))));
  }

  async firstPollDelay(product: string): Promise<number> {
    if (!this.#poll.adaptive) return this.#poll.initialMs;
    return (await this.#read(product)).ms;
  }

  /**
   * The first-poll delay once answers moved it (a first poll's sample, of any process), else
   * undefined: while it is still the prior (VQ_POLL_INITIAL) or first contact's seed, twice one
   * answer. The feeder's closing creates read it (queue/feeder.ts #closing): weighed with the seed,
   * a slow first answer (2.6 s: 5.2 s) marked half a cold 300-plate batch at 30/s as closing before
   * any of its polls was due, the polls that would have taught the schedule then yielded to every
   * create, and the whole batch was paid before one result was read. A configured (fixed) delay is
   * known from the start.
   */
  async learnedDelay(product: string): Promise<number | undefined> {
    if (!this.#poll.adaptive) return this.#poll.initialMs;
    const { ms, learned } = await this.#read(product);
    return learned ? ms : undefined;
  }

  /** The stored delay and whether answers moved it, read at most once a second per product. */
  async #read(product: string): Promise<{ ms: number; learned: boolean }> {
    const now = this.#now();
    const cached = this.#cache.get(product);
    if (cached && now - cached.at < 1_000) return cached;
    const [offset, pending, finished] = await this.#redis.hmget(
      this.#keys.learner(product),
      'logOffset',
      'pending',
      'finished',
    );
    const read = {
      at: now,
      ms: this.#fromOffset(offset ? Number(offset) : 0),
      learned: Number(pending ?? 0) + Number(finished ?? 0) > 0,
    };
    this.#cache.set(product, read);
    return read;
  }

  /**
   * The wait before the second poll of a query its first poll found pending `elapsedMs` after the
   * create (pendingPollDelay), once the upstream stated STATED_NEEDED answer times; undefined
   * before. The first poll is at the answers' 90 % point, so one plate
   * in ten is pending there, and a whole VQ_POLL_INTERVAL later it waited for answers that were
   * all but in (1-3 s answers polled at 2.8 s were read at 4.8): a batch's last plates so held
   * its end by those seconds.
   */
  async pendingPollDelay(product: string, elapsedMs: number): Promise<number | undefined> {
    if (!this.#poll.adaptive) return undefined;
    const now = this.#now();
    let stated = this.#stated.get(product);
    if (!stated || now - stated.at >= 1_000) {
      const raw = await this.#redis.lrange(this.#keys.learnerStated(product), 0, -1);
      stated = { at: now, ms: raw.map((v) => this.#poll.initialMs * Math.exp(Number(v))) };
      this.#stated.set(product, stated);
    }
    if (stated.ms.length < STATED_NEEDED) return undefined;
    return pendingPollDelay(stated.ms, elapsedMs, this.#poll.quantile);
  }

  /**
   * One first poll, made `elapsedMs` after the create, found the query pending (or finished, having
   * taken `tookMs` when the upstream said: answeredWithin). The sample is sent with the others of
   * the next OBSERVE_EVERY_MS.
   */
  observe(product: string, pendingAtFirstPoll: boolean, elapsedMs: number, tookMs?: number): void {
    if (!this.#poll.adaptive) return;
    const took = pendingAtFirstPoll || tookMs === undefined ? undefined : Math.min(tookMs, elapsedMs);
    const kind = pendingAtFirstPoll ? '1' : took === undefined ? '0' : '2';
    this.#push(product, Math.log(Math.max(1, took ?? elapsedMs) / this.#poll.initialMs), kind);
  }

  /**
   * A query finished, having taken `tookMs` by the upstream's own timestamps (answeredWithin), at
   * whichever poll: kept with the product's answer times, whose quantile becomes the estimate once
   * there are STATED_NEEDED of them. Every finished query counts, not only those a first poll
   * found finished (those alone would read the answers faster than they are).
   */
  stated(product: string, tookMs: number): void {
    if (!this.#poll.adaptive) return;
    this.#push(product, Math.log(Math.max(1, tookMs) / this.#poll.initialMs), '3');
  }

  /**
   * `count` answer times spread evenly from `fromMs` to `toMs`, stated and sent: what a deployment
   * that met its upstream knows of it, for a test or a bench run that starts from there rather than
   * from the 15 s prior (test/helpers/engine.ts metUpstream, bench/scheduling.ts).
   */
  async statedSpread(product: string, fromMs: number, toMs: number, count = 64): Promise<void> {
    for (let i = 0; i < count; i++) this.stated(product, fromMs + (i * (toMs - fromMs)) / Math.max(1, count - 1));
    await this.flush();
  }

  /**
   * The first plate an account's upstream answered took `tookMs`: where the estimate starts, when
   * nothing was learned yet for the product (seedMs). The 15 s prior is then never in force after a
   * first answer faster than a third of it.
   */
  async seed(product: string, tookMs: number): Promise<void> {
    if (!this.#poll.adaptive) return;
    const { minMs, maxMs } = firstPollBounds(this.#poll);
    const ms = Math.min(maxMs, Math.max(minMs, seedMs(tookMs, this.#poll.initialMs)));
    const offset = Math.log(ms / this.#poll.initialMs);
    if ((await this.#redis.hsetnx(this.#keys.learner(product), 'logOffset', String(offset))) === 1)
      this.#cache.set(product, { at: this.#now(), ms: this.#fromOffset(offset), learned: false });
    else this.#cache.delete(product);
  }

  #push(product: string, value: number, kind: string): void {
    let samples = this.#samples.get(product);
    if (!samples) this.#samples.set(product, (samples = []));
    samples.push(value, kind);
    this.#sending ??= this.#clock
      .setTimeout(() => {
        this.#sending = undefined;
        void this.flush().catch(() => undefined);
      }, OBSERVE_EVERY_MS)
      .unref();
  }

  /**
   * Sends the samples gathered (also at a worker's stop). A failure drops them: they are estimates'
   * input, not records.
   */
  flush(): Promise<void> {
    this.#clock.clearTimeout(this.#sending);
    this.#sending = undefined;
    const batch = [...this.#samples];
    this.#samples.clear();
    // A send that failed must not stop the ones after it (a rejected chain would skip them all).
    this.#flushing = this.#flushing
      .catch(() => undefined)
      .then(async () => {
        const { minMs, maxMs } = firstPollBounds(this.#poll);
        const initial = this.#poll.initialMs;
        for (const [product, samples] of batch) {
          const [offset, counted] = (await this.#redis.vqbLearnObserve(
            this.#keys.learner(product),
            this.#keys.learnerStated(product),
            learnStep(true, this.#poll.quantile),
            learnStep(false, this.#poll.quantile),
            Math.log(minMs / initial),
            Math.log(maxMs / initial),
            RELEVANCE,
            this.#poll.quantile,
            FIRST_GAIN,
            GAIN_OVER,
            STATED_KEPT,
            STATED_NEEDED,
            ...samples,
          )) as [string, number];
          // The script's count of first-poll samples is what learnedDelay reads (#read).
          this.#cache.set(product, { at: this.#now(), ms: this.#fromOffset(Number(offset)), learned: counted > 0 });
        }
      });
    return this.#flushing;
  }

  async snapshot(product: string): Promise<LearnedSchedule> {
    const fields = await this.#redis.hgetall(this.#keys.learner(product));
    const pending = Number(fields.pending ?? 0);
    const finished = Number(fields.finished ?? 0);
    return {
      firstPollMs: this.#fromOffset(Number(fields.logOffset ?? 0)),
      samples: pending + finished,
      pendingAtFirstPoll: pending,
    };
  }
}

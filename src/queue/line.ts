// An account's line: whether its requests may go out now, and if not why. Paused because its key
// cannot work (every job would fail the same way), held because the upstream asked it to wait
// (429, quota), or holding its creates at a spending cap. Pacing lives here too: every request of
// the account takes a slot on one schedule in Redis, shared by every worker on every machine.
// This module alone reads and writes the account's line and pace hashes; each configured account's
// line is made once, with its record in src/queue/accounts.ts.

import { type Account, isAuto, JITTER_PER_WINDOW, pacingIntervalMs, perSecond } from '../accounts/account.js';
import type { LimitReason } from '../accounts/wait.js';
import { clock } from '../clock.js';
import { wakeAt } from '../engine/bullmq/keys.js';
import type { RedisClient } from '../redis/connection.js';
import type { VqbKeys } from '../redis/keys.js';
import { type Scripted, withScripts } from '../redis/scripts.js';
import { boundText, MAX_PAUSE_MESSAGE, MAX_WAIT_MS, saneTime } from '../upstream/bounds.js';
import type { RateLimitHeaders } from '../upstream/timing.js';
import type { PlateQueue } from './account-queues.js';
import { holdChannel, holdMessage } from './hold-news.js';
import type { CapHold } from './scheduler.js';

/** The pause code `vqb pause` records: an operator's decision, which `vqb run` never lifts by itself. */
export const OPERATOR_PAUSE = 'PAUSED_BY_OPERATOR';

export interface AccountPause {
  code: string;
  message: string;
  at: number;
}

export interface AccountLineState {
  account: string;
  /** The account's queue is paused (by a key failure or an operator). */
  paused: boolean;
  /** Why, when a key failure (or an operator with a reason) paused it. */
  pause?: AccountPause;
  /** Epoch ms until which no request of the account goes out, when the upstream asked to wait. */
  limitedUntil?: number;
  limitReason?: LimitReason;
  /** Epoch ms until which creates wait because the account's spending cap (day or month) is reached. */
  budgetUntil?: number;
  budgetReason?: 'day' | 'month';
  /** The configured limit, e.g. `300/min` or `auto`. */
  rateLimit: string;
  /** The rate the account is paced at now, and where it comes from (absent from an archived batch's view). */
  rate?: LineRate;
  /** The upstream has not answered the account's last requests (after UNREACHABLE_AFTER failures in a row). */
  unreachable?: UpstreamOutage;
  /** The last outage, once it ended (shown for a while: "reachable again since …"). */
  reachableAgain?: { at: number; downMs: number; reason: string };
}

/** Failed requests in a row before the upstream counts as unreachable (one slow answer is not an outage). */
export const UNREACHABLE_AFTER = 3;
/** How long status keeps saying an outage ended ("reachable again since 14:05, after 3 min"). */
const SHOW_BACK_MS = 15 * 60_000;

export interface UpstreamOutage {
  /** Epoch ms of the first failed request of the run of failures. */
  since: number;
  /** Failed requests since then, by every process. */
  attempts: number;
  /** The last failure, in words ("connection refused", "HTTP 502"). */
  reason: string;
  lastAt: number;
}

/**
 * configured: the number set (VQ_RATE_LIMIT, the accounts file). For `auto`: start (nothing heard
 * yet), announced (the upstream's rate-limit headers say it), learned (from 429s and probing).
 */
export type RateSource = 'configured' | 'start' | 'announced' | 'learned';

export interface LineRate {
  perSecond: number;
  source: RateSource;
  /** The upstream's announced limit and its window, when it announced one. */
  limit?: number;
  windowMs?: number;
  /** `auto<=…`: never above this. */
  ceilingPerSecond?: number;
  /** Epoch ms of the last 429 and of the last probe above the learned rate. */
  last429At?: number;
  lastProbeAt?: number;
}

/**
 * `at`: the reserved slot's start as the pace wrote it (Redis's clock, ms, as text): a request that
 * gives the slot up names it (`slot(horizon, at)`), so the pace knows which slot was never sent.
 */
export type Slot =
  /**
   * `windowMs`: the window of the limit the upstream announced, when one was heard (by any
   * process). `followsMs`: the slot after this one is at least this far from the ask (none after
   * an early slot).
   */
  | { reserved: true; waitMs: number; at: string; windowMs?: number; early?: true; followsMs?: number }
  | { reserved: false; waitMs: number; reason: 'pace' | 'hold' };

/** What pace-acquire (and create-admit, when it got as far as the pace) answers. */
export type SlotReply = [
  reserved: number,
  wait: string,
  reason: 'pace' | 'hold',
  at?: string,
  windowMs?: string,
  early?: string,
  follows?: string,
];

export function slotOf([reserved, wait, reason, at, window, early, follows]: SlotReply): Slot {
  const waitMs = Math.max(0, Number(wait));
  if (reserved !== 1) return { reserved: false, waitMs, reason };
  const windowMs = Number(window);
  return {
    reserved: true,
    waitMs,
    at: at ?? '',
    ...(window && windowMs > 0 ? { windowMs } : {}),
    ...(early === '1' ? { early: true as const } : {}),
    ...(follows ? { followsMs: Number(follows) } : {}),
  };
}

const SCRIPTS = [
  'pace-acquire',
  'pace-hold',
  'pace-held',
  'pace-shift',
  'pace-learn',
  'account-pause',
  'account-resume',
  'upstream-failed',
  'upstream-answered',
] as const;

export class AccountLine {
  readonly account: Account;
  readonly queue: PlateQueue;
  /** The gap between two requests of the account, ms. */
  readonly intervalMs: number;
  readonly #redis: Scripted<(typeof SCRIPTS)[number]>;
  readonly #keys: VqbKeys;
  readonly #now: () => number;
  /**
   * The pace's clock, for a test that owns time: the pace, hold and learn scripts read it instead
   * of Redis TIME. Production never passes one (test/unit/pace-clock.test.ts holds that): Redis's
   * clock is the one every worker on every machine shares.
   */
  readonly #scriptNow: (() => number) | undefined;

  constructor(
    account: Account,
    queue: PlateQueue,
    redis: RedisClient,
    keys: VqbKeys,
    jitterMs: number,
    now: () => number = clock.now,
    testing: { scriptNow?: () => number } = {},
  ) {
    this.account = account;
    this.queue = queue;
    this.intervalMs = pacingIntervalMs(account, jitterMs);
    this.#redis = withScripts(redis, SCRIPTS);
    this.#keys = keys;
    this.#now = now;
    this.#scriptNow = testing.scriptNow;
  }

  /** The scripts' `now` argument: none in production (Redis TIME), a test's clock otherwise. */
  get #at(): string[] {
    return this.#scriptNow ? [String(this.#scriptNow())] : [];
  }

  get #line(): string {
    return this.#keys.account(this.account.id);
  }

  get #pace(): string {
    return this.#keys.pace(this.account.id);
  }

  /**
   * The account's next request slot, reserved when it is at most `horizonMs` away: sleep
   * `waitMs`, then send. Otherwise nothing is reserved and the slot is `waitMs` away. `retake`:
   * the slot (its `at`) the request gave up (a hold, a late wake-up), so this one is not counted
   * again and takes its place among the slots an `auto` account took before it heard a limit.
   */
  async slot(horizonMs: number, retake?: string, urgent = false): Promise<Slot> {
    const { keys, args, at } = this.paceTerms(horizonMs, retake, urgent);
    return slotOf((await this.#redis.vqbPaceAcquire(...keys, ...args, ...at)) as SlotReply);
  }

  /**
   * What the pace's rule (lua/includes/pace-take.lua) needs: for pace-acquire and for the
   * create's one admission script (queue/admission.ts).
   */
  paceTerms(
    horizonMs: number,
    retake?: string,
    urgent = false,
  ): { keys: string[]; args: (string | number)[]; at: string[] } {
    // `urgent`: an interactive request, which claims the next slot when it is beyond the horizon.
    const mode = `${this.auto ? 'auto' : 'cap'}${urgent ? '!' : ''}`;
    return {
      keys: [this.#pace],
      // A slot given up is named by its start; '' (a reply without one) still counts as a retake.
      args: [this.intervalMs, horizonMs, mode, retake === undefined ? '0' : retake || '1'],
      // Last, after every other argument of the script that takes the slot: absent in production.
      at: this.#at,
    };
  }

  /**
   * A request left `ms` later than its allowance (its slot: `at`): every slot not yet taken moves
   * back by `ms` (lua/pace-shift-1.lua says why).
   */
  async shift(at: string, ms: number): Promise<void> {
    await this.#redis.vqbPaceShift(this.#pace, at, ms.toFixed(3), this.intervalMs, this.auto ? 'auto' : 'cap');
  }

  /**
   * No request of the account goes out for `ms`, unless a longer hold is in force; no worker
   * takes the account's jobs meanwhile. True when this call set or lengthened the hold.
   */
  async hold(ms: number, reason: LimitReason): Promise<boolean> {
    // Redis takes whole ms (PX) and a Date must hold the end: a wait past the sane maximum would
    // wedge the account (ERR value is not an integer on every job), so none is ever stored.
    const wait = holdMs(ms);
    const until = Number(
      await this.#redis.vqbPaceHold(
        this.#pace,
        this.#line,
        wait,
        reason,
        this.#at[0] ?? '',
        holdChannel(this.#keys),
        this.account.id,
      ),
    );
    await this.stopTaking(wait);
    return until > 0;
  }

  /**
   * The key a hold in force is kept in (the pace hash: its `hold` field, the hold's end): for a
   * script that runs right before a request anyway and reads the hold too (job-fence, before a
   * create), so the send needs no heldFor of its own.
   */
  get holdKey(): string {
    return this.#pace;
  }

  /**
   * Ms left of the account's hold (0: none), on Redis's clock (a test's, when it owns time): the
   * hold's end is a field compared with a now (pace-held), not a key's time to live, so a virtual
   * clock holds and lifts it as Redis TIME does. One script call, as the PTTL it replaces.
   */
  async heldFor(): Promise<number> {
    return Math.max(0, Number(await this.#redis.vqbPaceHeld(this.#pace, ...this.#at)));
  }

  /**
   * Why the account cannot serve for a while, or undefined when it can: paused (a key failure, an
   * unreadable answer, an operator: the pause's code), held longer than `longerThanMs` (`quota`, or
   * `rate_limit` for a long 429 wait) or its creates held at a spending cap (`budget`). A key of a
   * pool that holds so gives its waiting plates to the others (queue/pool.ts).
   */
  async holding(longerThanMs: number): Promise<string | undefined> {
    const [[code, reason, budgetUntil], heldMs] = await Promise.all([
      this.#redis.hmget(this.#line, 'code', 'limitReason', 'budgetUntil'),
      this.heldFor(),
    ]);
    if (code) return code;
    if (Number(budgetUntil ?? 0) > this.#now()) return 'budget';
    if (heldMs > longerThanMs) return reason === 'quota' ? 'quota' : 'rate_limit';
    return undefined;
  }

  /**
   * This key's quota looks shared with `other`'s (queue/pool.ts) until `until` (epoch ms). Kept in
   * the pace hash: the pace splits the limit the key announces among the keys that share it, from
   * the next answer learned (lua/pace-learn), in every process alike.
   */
  async markSharedQuota(other: string, until: number): Promise<void> {
    await this.#redis.hset(this.#pace, `quotaWith:${other}`, String(until));
  }

  /** The keys this one's quota looks shared with now. */
  async sharedQuota(): Promise<string[]> {
    const fields = await this.#redis.hgetall(this.#pace);
    const now = this.#now();
    return Object.entries(fields)
      .filter(([field, until]) => field.startsWith('quotaWith:') && Number(until) > now)
      .map(([field]) => field.slice('quotaWith:'.length));
  }

  /** BullMQ's switch: no worker takes a job of this account for `ms`. */
  async stopTaking(ms: number): Promise<void> {
    const wait = holdMs(ms);
    await this.queue.rateLimit(wait);
    // A Worker blocked on the queue would sleep through the end of this wait (up to its
    // drainDelay, 5 s): a marker due when it ends wakes one (src/engine/bullmq/keys.ts says why).
    await wakeAt(this.#redis, this.queue, this.#now() + wait);
  }

  /** The rate is learned (`auto`), not configured. */
  get auto(): boolean {
    return isAuto(this.account);
  }

  /**
   * Feeds one answer to the account's learned rate (`auto` only): what it announced, or a 429.
   * Returns the rate in force and whether this call changed it.
   */
  async learn(
    event: 'ok' | '429',
    said: RateLimitHeaders | undefined,
    jitterMs: number,
    /** A 429's request: the slot it was sent in (its `at`), when known. */
    refusedSlot?: string,
  ): Promise<{ perSecond: number; source: RateSource; windowMs?: number; changed: boolean }> {
    // A configured rate is the user's word: nothing announced replaces it, and it is the ceiling.
    const announced = this.auto && said?.limit !== undefined && said.limit > 0;
    const resetIn = announced && said.resetAt !== undefined ? Math.max(0, said.resetAt - this.#now()) : undefined;
    const ceiling = this.auto ? this.account.rateLimit.auto?.ceilingPerSecond : perSecond(this.account);
    const [rate, source, windowMs, changed] = (await this.#redis.vqbPaceLearn(
      this.#pace,
      event,
      announced ? String(said.limit) : '',
      announced && said.windowMs !== undefined ? String(said.windowMs) : '',
      resetIn !== undefined ? String(resetIn) : '',
      String(perSecond(this.account)),
      ceiling !== undefined ? String(ceiling) : '',
      String(jitterMs),
      this.auto ? 'auto' : 'cap',
      String(JITTER_PER_WINDOW),
      announced && said.remaining !== undefined ? String(said.remaining) : '',
      refusedSlot ?? '',
      ...this.#at,
    )) as [string, RateSource, string, number];
    const value = Number(rate);
    // A configured rate the upstream accepts is in force exactly; below it, it was learned from 429s.
    const shown: RateSource =
      !this.auto && (source !== 'learned' || value >= perSecond(this.account) * 0.999) ? 'configured' : source;
    return {
      perSecond: value,
      source: shown,
      ...(windowMs ? { windowMs: Number(windowMs) } : {}),
      changed: changed === 1,
    };
  }

  /** The rate the account is paced at now (for `auto`, the shared estimate), for status and ETAs. */
  async rate(): Promise<LineRate> {
    const [rate, source, announced, windowMs, last429At, probeAt] = await this.#redis.hmget(
      this.#pace,
      'rate',
      'source',
      'announced',
      'windowMs',
      'last429At',
      'probeAt',
    );
    if (!this.auto) {
      const configured = perSecond(this.account);
      // Below the configured rate only while the upstream refuses it (429s); then learned, with the
      // configured rate as ceiling.
      if (source !== 'learned' || rate === null || Number(rate) >= configured * 0.999)
        return { perSecond: configured, source: 'configured' };
      return {
        perSecond: Number(rate),
        source: 'learned',
        ceilingPerSecond: configured,
        ...(last429At ? { last429At: Number(last429At) } : {}),
      };
    }
    const ceiling = this.account.rateLimit.auto?.ceilingPerSecond;
    const out: LineRate = {
      perSecond: Number(rate ?? perSecond(this.account)),
      source: (source as RateSource | null) ?? 'start',
    };
    if (ceiling !== undefined) out.ceilingPerSecond = ceiling;
    if (out.source === 'announced' && announced) out.limit = Number(announced);
    if (out.source === 'announced' && windowMs) out.windowMs = Number(windowMs);
    if (last429At) out.last429At = Number(last429At);
    if (probeAt && Number(probeAt) > 0) out.lastProbeAt = Number(probeAt);
    return out;
  }

  /** Consecutive 429s without a hint, for backoff shared by every worker; 0 resets it. */
  async streak(reset = false): Promise<number> {
    if (reset) {
      await this.#redis.hdel(this.#pace, 'streak');
      return 0;
    }
    return this.#redis.hincrby(this.#pace, 'streak', 1);
  }

  /**
   * Pauses the account for every worker: `recorded` when this call recorded the reason (its
   * caller says so, once), `already` when it was. `sentAt` is when the failed request was sent:
   * one sent before the account's last resume pauses nothing (`before-resume`: the operator fixed
   * the key since; lua/account-pause-1.lua).
   */
  async pause(code: string, message: string, sentAt?: number): Promise<'recorded' | 'already' | 'before-resume'> {
    // The message may quote the upstream; it goes to /healthz, webhooks and logs: 4 KB at most.
    const kept = boundText(message, MAX_PAUSE_MESSAGE);
    const verdict = Number(
      await this.#redis.vqbAccountPause(this.#line, code, kept, this.#now(), sentAt === undefined ? '' : sentAt),
    );
    if (verdict < 0) return 'before-resume';
    await this.queue.pause();
    // A resume between the script and BullMQ's pause would leave the queue paused with no reason
    // recorded, which no resume is asked for: the reason gone, the pause is taken back.
    if ((await this.#redis.hexists(this.#line, 'code')) === 0) {
      await this.queue.resume();
      return 'before-resume';
    }
    return verdict === 1 ? 'recorded' : 'already';
  }

  /**
   * Operator resume: clears the recorded reason and lets every worker take the account's jobs
   * again. Returns the pause it lifted, when one was recorded (for the account.resumed webhook).
   * An operator's door (vqb resume, the console, the library) calls releaseHold too.
   */
  async resume(): Promise<AccountPause | undefined> {
    const lifted = (await this.#redis.vqbAccountResume(this.#line, this.#now())) as string[];
    await this.queue.resume();
    const [code, message, at] = lifted;
    return code ? { code, message: message ?? '', at: Number(at) } : undefined;
  }

  /**
   * Forgets the upstream's hold (a 429's wait, a quota's reset): whatever is stored, even a value
   * no reader can use, is gone, so nothing an upstream said wedges an account past `vqb resume`.
   * True when there was one. The next request may be told to wait again, with a usable hint.
   */
  async releaseHold(): Promise<boolean> {
    const replies = (await this.#redis
      .multi()
      .hdel(this.#pace, 'hold')
      .hdel(this.#line, 'limitedUntil', 'limitReason')
      .publish(holdChannel(this.#keys), holdMessage(this.account.id, 0))
      .exec()) as [unknown, number][] | null;
    await this.queue.removeRateLimitKey();
    return (replies ?? []).slice(0, 2).some(([, n]) => n > 0);
  }

  /** Creates wait for a spending cap's reset; true when this call recorded it. */
  async holdCreates(until: number, reason: 'day' | 'month'): Promise<boolean> {
    const before = await this.#redis.hget(this.#line, 'budgetUntil');
    if (before === String(until)) return false;
    await this.#redis.hset(this.#line, 'budgetUntil', String(until), 'budgetReason', reason);
    return true;
  }

  /** A request got no usable answer; returns the outage so far (every process adds to one count). */
  async upstreamFailed(reason: string): Promise<{ since: number; attempts: number }> {
    const [since, attempts] = (await this.#redis.vqbUpstreamFailed(this.#line, this.#now(), reason)) as [
      string,
      number,
    ];
    return { since: Number(since), attempts: Number(attempts) };
  }

  /** A request was answered; returns the outage it ended, to this caller only. */
  async upstreamAnswered(): Promise<{ since: number; attempts: number; reason: string } | undefined> {
    const ended = (await this.#redis.vqbUpstreamAnswered(this.#line, this.#now())) as string[];
    if (ended.length === 0) return undefined;
    return { since: Number(ended[0]), attempts: Number(ended[1]), reason: ended[2] ?? '' };
  }

  /** Operator pause, with the reason shown by status. */
  async pauseByOperator(message = 'paused by an operator'): Promise<void> {
    await this.pause(OPERATOR_PAUSE, message);
  }

  /**
   * Where a feed reads whether the account's creates are held at a spending cap (in its own script,
   * queue/scheduler.ts).
   */
  get capHold(): CapHold {
    return { key: this.#line, field: 'budgetUntil' };
  }

  async releaseCreates(): Promise<void> {
    await this.#redis.hdel(this.#line, 'budgetUntil', 'budgetReason');
  }

  async state(): Promise<AccountLineState> {
    const [fields, paused, rate] = await Promise.all([
      this.#redis.hgetall(this.#line),
      this.queue.isPaused(),
      this.rate(),
    ]);
    const now = this.#now();
    const state: AccountLineState = { account: this.account.id, paused, rateLimit: this.account.rateLimit.text, rate };
    if (fields.code) state.pause = { code: fields.code, message: fields.message ?? '', at: Number(fields.at) };
    // Stored times are read as dates only when they can be one (a value written before the bounds
    // were checked, or by hand, must not make /healthz or `vqb status` throw).
    const until = saneTime(Number(fields.limitedUntil));
    if (until !== undefined && until > now) {
      state.limitedUntil = until;
      state.limitReason = fields.limitReason === 'quota' ? 'quota' : 'rate_limit';
    }
    if (fields.upSince !== undefined && Number(fields.upAttempts) >= UNREACHABLE_AFTER) {
      state.unreachable = {
        since: Number(fields.upSince),
        attempts: Number(fields.upAttempts),
        reason: fields.upReason ?? '',
        lastAt: Number(fields.upLastAt),
      };
    } else if (
      fields.upBackAt !== undefined &&
      now - Number(fields.upBackAt) < SHOW_BACK_MS &&
      Number(fields.upBackAttempts) >= UNREACHABLE_AFTER
    ) {
      state.reachableAgain = {
        at: Number(fields.upBackAt),
        downMs: Number(fields.upDownMs),
        reason: fields.upBackReason ?? '',
      };
    }
    const budgetUntil = saneTime(Number(fields.budgetUntil));
    if (budgetUntil !== undefined && budgetUntil > now) {
      state.budgetUntil = budgetUntil;
      state.budgetReason = fields.budgetReason === 'month' ? 'month' : 'day';
    }
    return state;
  }
}

/** A hold's length as Redis takes it: whole ms, at least 1, at most MAX_WAIT_MS. */
function holdMs(ms: number): number {
  return Number.isFinite(ms) ? Math.min(MAX_WAIT_MS, Math.max(1, Math.ceil(ms))) : MAX_WAIT_MS;
}

// Flow control of one account, as the processor sees it: may this request go out now, and what
// to do when the upstream or a cap says no. It asks the modules that own the state (the account's
// line and pace, the in-flight cap, the spending caps, the scheduler) and returns what the
// processor should do with the job; it never touches a job itself.

import type { Logger } from 'pino';
import { jitterAllowanceMs, perSecond } from '../src/accounts/account.js';
import type { LimitReason } from '../src/accounts/wait.js';
import { type Clock, clockWith } from '../src/clock.js';
import { StoppedBeforeSendError } from '../src/errors.js';
import { noMetrics, type WorkerMetrics } from '../src/metrics.js';
import { createPriority, PRIORITY, pollPriority } from '../src/queue/account-queues.js';
import type { CreateAdmission } from '../src/queue/admission.js';
import type { AnswerBook } from '../src/queue/answers.js';
import type { Budget } from '../src/queue/budget.js';
import type { HoldNews } from '../src/queue/hold-news.js';
import type { InFlight } from '../src/queue/inflight.js';
import { type AccountLine, type Slot, UNREACHABLE_AFTER } from '../src/queue/line.js';
import type { KeyPools } from '../src/queue/pool.js';
import type { Scheduler } from '../src/queue/scheduler.js';
import type { PlateJobData, PriorityClass } from '../src/queue/types.js';
import { annotate, SPAN, spanned } from '../src/telemetry/index.js';
import { dateText, spanText } from '../src/time-text.js';
import type { QuotaSnapshot, SendOptions } from '../src/upstream/client.js';
import { type AnyUpstreamError, QUOTA_WAIT_MS, type RateLimitedError } from '../src/upstream/errors.js';
import { backoffDelay } from '../src/upstream/timing.js';
import { adviceFor } from './actions.js';
import { FirstContact } from './first-contact.js';

/** What the processor does next with a job that wants to send a request. */
export type Admission =
  /**
   * The account's slot has come; `due` (the clock's monotonic()) is when: pass it to `ready` just before
   * sending. `at` names the slot to the pace, should the request give it up. `priority`
   * (BullMQ's: interactive 1, poll 2, normal 3, bulk 4) orders a new wait.
   */
  | { go: true; due: number; at: string; priority: number; early?: true }
  /**
   * Put the job back: the account's next slot is far off; no worker takes its jobs for `retryInMs`.
   * `stopped`: the account is paused or held (a key failure, an answer vqb cannot read), not paced:
   * the job goes back for the pause, and a request that had a slot gives it up unsent.
   */
  | { go: false; why: 'later'; retryInMs: number; stopped?: true }
  /** The account's in-flight cap is reached: try again in `retryInMs` without holding a slot. */
  | { go: false; why: 'inflight'; retryInMs: number }
  /** A spending cap is reached: the job waits until `until` (the batch's cap: until it is raised). */
  | { go: false; why: 'cap'; heldBy: 'batch' | 'day' | 'month'; until: number }
  /** A create's plate has its outcome already: nothing is sent, the job ends (its slot given back). */
  | { go: false; why: 'finished' };

/** What a poll is told, and a create once it is known not to be finished: all but `finished`. */
export type SendAdmission = Exclude<Admission, { why: 'finished' }>;

export interface FlowDeps {
  line: AccountLine;
  /** A create's in-flight slot, pacing slot and cap unit, taken in one step. */
  admission: CreateAdmission;
  inflight: InFlight;
  /** First contact and the answers that held the account (queue/answers.ts). */
  answers: AnswerBook;
  budget: Budget;
  scheduler: Scheduler;
  /** VQ_PACING_JITTER: a request woken later than half of it takes the next slot instead. */
  jitterMs: number;
  logger: Logger;
  metrics?: WorkerMetrics;
  now?: () => number;
  /** The time the process runs on (its monotonic readings and sleeps; `now` when that is not given). */
  clock?: Clock;
  random?: () => number;
  /** Told once per key-level pause, by the worker whose call recorded it (it emits account.paused). */
  onPaused?: (accountId: string) => Promise<void>;
  /** Told when this process ended the account's first contact (workers/first-contact.ts). */
  onUnderstood?: (accountId: string) => Promise<void>;
  /**
   * Pools of keys: told what each answer announced of the key's quota, and each 429 (queue/pool.ts:
   * keys that are one quota).
   */
  pools?: Pick<KeyPools, 'observe' | 'limited'>;
  /**
   * The holds as published to this process (queue/hold-news.ts): a request that slept for its slot
   * reads them from memory; without it, or while the news may be incomplete, it asks Redis.
   */
  holdNews?: Pick<HoldNews, 'heldFor'>;
}

/**
 * How late a slot taken before any limit was heard may still be used: well under the 1.5 s that
 * separates such slots (pace-take.lua EARLY_GAP_MS), so two of them never come closer than 1 s.
 */
const EARLY_LATE_MS = 500;

/**
 * A request late for its slot (by up to an interval) on a key paced at least this far apart is
 * sent late, not moved to the next slot: the write moves the schedule back by the lateness
 * (#written), and the request N slots after it is reserved a window later, long after that move.
 * A lost slot there costs a whole interval (5 s at 12/min): on the 1,000-account bench (12/min
 * keys, 4 processes on 2 cores) 634 slots were given up in a run, half of them over 1 s late (the
 * fence's round trip queued behind a feed pass on the process's connection), and 121 keys fell
 * under 0.9 of their limit. Faster keys still give the slot up: sent late (by up to an interval,
 * the pace moved back by the excess over half the allowance, or by the whole lateness), a loaded
 * 2-core machine's cold gate read their shares 0.005-0.015 higher and drew 429s in three runs of
 * four (the excess: 1-2 a scenario in both runs; the whole lateness: after stalls of the
 * simulator's process), where giving up drew none in four and one, after such a stall, in a
 * fifth (bench/RESULTS.md, stop 77): too little for a schedule with no slot left empty. A key
 * paced so slowly that its next slot is within the horizon (one request a window: 1/s) never
 * sends late: that slot is taken before the move can land, and the two would go closer than a
 * window.
 */
const SEND_LATE_FROM_INTERVAL_MS = 1_000;

/** How long a late request's move of the schedule may take to reach Redis, within the window. */
const SEND_LATE_MOVE_MS = 250;

/** A pacing slot at most this far off is waited for in the worker, not by putting the job back. */
const WAIT_HERE_MS = 2_000;
/**
 * How far within the horizon the next slot must be for its waiter to ask at this request's wake
 * (#askAt): a timer may fire up to a millisecond before its fractional time, and the slot's start
 * is read off replies rounded to the millisecond.
 */
const ASK_MARGIN_MS = 10;

/**
 * A poll that has come due waits at most this long (an interval of the rate, if shorter) for a
 * wake of its process for one of the account's slots, before a timer of its own wakes it (untilDue).
 */
const DUE_GRACE_MS = 50;

/** How often a process that sees only answers asks whether an outage recorded by another process ended. */
const REACH_CHECK_MS = 5_000;

/** A failure that says the upstream is not reachable or not working: no answer, or a 5xx. */
/**
 * How long a 429 holds the account: its Retry-After, except that a learned rate already stepped
 * down (within a per-second window the excess clears in a few intervals), so a 429 asking for
 * "1 s" idles the account no longer than about three intervals.
 */
export function rateLimitHoldMs(retryAfterMs: number, rate: { source: string; perSecond: number }): number {
  if (rate.source === 'learned' && retryAfterMs <= 1_000)
    return Math.min(retryAfterMs, Math.max(50, 3_000 / rate.perSecond));
  return retryAfterMs;
}

/** Puts `item` in `list`, kept in ascending order of `key`, after the items with the same value. */
function insertBy<K extends string, T extends Record<K, number>>(list: T[], item: T, key: K): void {
  // From the end: a new item mostly goes last or near it (a poll due later than those waiting, a
  // request of the line's usual priority), and a scan from the front read the whole list each time
  // (0.9 % of the samples of a V8 profile of a cold batch's worker, with 300 polls waiting).
  let i = list.length;
  while (i > 0 && list[i - 1]![key] > item[key]) i--;
  if (i === list.length) list.push(item);
  else list.splice(i, 0, item);
}

/** A request waiting in the process's line for the account's slot (AccountFlow#turn). */
interface Waiter {
  priority: number;
  go: (askAt?: number) => void;
  yieldsUntil?: number;
  /** A newcomer batch's first create (admitCreate's `fresh`): it may take a turn from a poll (#nextWaiter). */
  jumps?: true;
}

/** A yielding poll's place in the line: after a normal create, before a bulk one (admitPoll). */
const YIELDING = PRIORITY.normal + 0.5;

export function isUnreachable(err: AnyUpstreamError): boolean {
  return err.kind === 'transient' && (err.status === 0 || err.status >= 500);
}

const REASONS: Record<string, string> = {
  CONNECTION_REFUSED: 'connection refused',
  CONNECT_TIMEOUT: 'connection timed out',
  CONNECTION_RESET: 'connection reset',
  HEADERS_TIMEOUT: 'no answer in time',
  BODY_TIMEOUT: 'the answer stalled',
  REQUEST_TIMEOUT: 'no answer in time',
  NETWORK_ERROR: 'network error',
};

function unreachableReason(err: AnyUpstreamError): string {
  if (err.status >= 500) return `HTTP ${err.status}${err.upstreamCode ? ` ${err.upstreamCode}` : ''}`;
  return REASONS[err.code] ?? err.code.toLowerCase().replaceAll('_', ' ');
}

/** A batch held at its own cap waits this long at most before it looks again (`vqb budget` wakes it sooner). */
const BATCH_CAP_HOLD_MS = 30 * 86_400_000;

export class AccountFlow {
  readonly #d: FlowDeps;
  readonly #now: () => number;
  readonly #clock: Clock;
  /**
   * A request of this process failed on the key, which paused the account (and when it last looked
   * since). `heard`: the failure was read (heardKeyFailure) and no pause is known recorded yet.
   */
  #keyPause: { checkedAt: number; heard?: true } | undefined;
  readonly #random: () => number;
  readonly #metrics: WorkerMetrics;
  /**
   * How far ahead a slot may be reserved: one interval (of the rate in force) plus the time a woken
   * worker takes to ask.
   */
  get horizonMs(): number {
    return Math.max(1_000 / this.#rate, 20) + 20;
  }
  #inStreak = false;
  /**
   * `auto`: when this process last fed an answer to the learned rate, the limit it last heard, the
   * source it last logged.
   */
  #learned = { at: 0, limit: undefined as number | undefined, source: undefined as string | undefined };
  /** A configured rate far from the upstream's announced limit is said once per process. */
  #warnedConfigured = false;
  #rate: number;
  /** The window of the limit in force (an announced one, else the configured), for the jitter allowance. */
  #windowMs: number;
  /**
   * This process's requests waiting for the account's slot (see #slot): whether one asks Redis now,
   * the others in order.
   */
  #asking = false;
  readonly #waiters: Waiter[] = [];
  /** The request that has the line's turn now is a poll's (not an interactive one's): #nextWaiter alternates. */
  #pollHadTurn = false;
  /** Until when (the clock's monotonic()) the in-flight cap refuses creates, as last heard: #nextWaiter. */
  #createsRefusedUntil = 0;
  /** The soonest `yieldsUntil` among #waiters (#unyield), the clock's now(). */
  #yieldEnds = Number.POSITIVE_INFINITY;
  /** This process's polls waiting to come due (untilDue), soonest first. */
  readonly #due: { at: number; go: () => void }[] = [];
  /** What each signal given to untilDue aborts when it does (#onAbort). */
  readonly #dueAborts = new WeakMap<AbortSignal, Set<() => void>>();
  /**
   * Reachability: this process saw a failure since its last answer; when it last asked whether an
   * outage (of any process) ended.
   */
  #reach = { failed: false, checkedAt: 0 };

  constructor(deps: FlowDeps) {
    this.#d = deps;
    this.#clock = deps.clock ?? clockWith(deps.now);
    this.#now = deps.now ?? (() => this.#clock.now());
    this.#random = deps.random ?? Math.random;
    this.#metrics = deps.metrics ?? noMetrics;
    this.#rate = perSecond(deps.line.account);
    this.#windowMs = deps.line.account.rateLimit.durationMs;
    this.contact = new FirstContact({
      line: deps.line,
      answers: deps.answers,
      metrics: this.#metrics,
      now: this.#now,
      ...(deps.onPaused ? { onPaused: deps.onPaused } : {}),
      ...(deps.onUnderstood ? { onUnderstood: deps.onUnderstood } : {}),
    });
  }

  /** How the account's answers are read so far: first contact, and holds for answers vqb cannot read. */
  readonly contact: FirstContact;

  /** The account's rate in force as this process last heard it (for `auto`, the learned one), requests per second. */
  get ratePerSecond(): number {
    return this.#rate;
  }

  get accountId(): string {
    return this.#d.line.account.id;
  }

  /** The account's hold key, for the write made right before a create (queue/job-fence.ts `mark`). */
  get holdKey(): string {
    return this.#d.line.holdKey;
  }

  /**
   * A poll: only the pace decides. `yieldsUntil` (the clock's now()): its batch's creates are
   * closing until then (queue/feeder.ts closingUntil), so in this process's line it goes after the
   * creates of normal batches, not before, until then (#unyield).
   */
  admitPoll(cls: PriorityClass, yieldsUntil?: number): Promise<SendAdmission> {
    return spanned(SPAN.slotWait, { 'vqb.slot.phase': 'admission' }, () => this.#admitPoll(cls, yieldsUntil)).then(
      verdict,
    );
  }

  async #admitPoll(cls: PriorityClass, yieldsUntil: number | undefined): Promise<SendAdmission> {
    const yields = yieldsUntil !== undefined && cls !== 'interactive';
    // Between a normal create and a bulk one: a place in this process's line, never a BullMQ priority.
    const priority = yields ? YIELDING : pollPriority(cls);
    const slot = await this.#slot<never>(
      priority,
      (horizonMs, urgent) => this.#d.line.slot(horizonMs, undefined, urgent),
      yields ? yieldsUntil : undefined,
    );
    // A slot it gives up (woken late: #ready) is asked for again as a poll's: its yield is served.
    return 'why' in slot ? slot : { go: true, ...slot, priority: pollPriority(cls) };
  }

  /**
   * The account's next slot, slept until, when it is within the horizon. A slot a little further
   * off (the pace, not a hold) is waited for here: putting the job back on the queue costs BullMQ
   * about forty Redis commands and a fetch (issue 21: 578 commands a plate under `auto` when every
   * early job went back). The requests of this process that wait so form a queue, most urgent
   * first (`priority`), and only its head asks Redis (`ask`: the pace, or a create's whole
   * admission, which may refuse before any slot is taken): the others would only ask in vain, and
   * an interactive request taken now goes before creates that have waited. A hold, or a slot
   * further than WAIT_HERE_MS, puts the job back (`later`). `due` counts from before the request
   * to Redis, so a reply that reached a busy event loop late shows as lateness too.
   */
  async #slot<R extends { refused: string } = never>(
    priority: number,
    /** `urgent`: an interactive request (a person waits), which claims the next slot (lua/includes/pace-take.lua). */
    ask: (horizonMs: number, urgent: boolean) => Promise<Slot | R>,
    /** A yielding poll's `priority` holds until then (the clock's now()), and is a poll's after (#unyield). */
    yieldsUntil?: number,
    /** A newcomer batch's first create: it may take a turn from a poll (#nextWaiter). */
    jumps?: boolean,
  ): Promise<{ due: number; at: string; early?: true } | Extract<Admission, { why: 'later' }> | R> {
    const { done, askAt } = await this.#turn(priority, yieldsUntil, jumps);
    try {
      // Paused or held meanwhile (a key failure, an answer vqb cannot read): the jobs queued here
      // for their slot go back at once, not one a slot (a pool's key: its plates move sooner).
      if (await this.stopped()) return this.#later(0, true);
      // The request before this one said when to ask: asking before the next slot is near would
      // only be told to wait (a round trip and a wake-up a request at 30/s).
      const lead = askAt === undefined ? 0 : askAt - this.#clock.monotonic();
      if (lead > 0 && lead <= WAIT_HERE_MS) await this.#clock.sleep(lead);
      for (;;) {
        const asked = this.#clock.monotonic();
        const slot = await ask(this.horizonMs, priority === PRIORITY.interactive);
        if ('refused' in slot) return slot;
        if (slot.reserved) {
          // The window another process heard announced, before this one has an answer of its own.
          if (slot.windowMs !== undefined) this.#windowMs = slot.windowMs;
          // The next waiter is told at once when to ask (#askAt), and asks then. (Passing the turn
          // only when this slot came cost the pace a sixth: 16.6/s of an announced 20.)
          const due = asked + slot.waitMs;
          done(slot.followsMs === undefined ? undefined : this.#askAt(due, asked + slot.followsMs));
          const wait = due - this.#clock.monotonic();
          if (wait > 0) await this.#clock.sleep(wait);
          this.#wakeDue();
          return { due, at: slot.at, ...(slot.early ? { early: true as const } : {}) };
        }
        // An interactive request waits here for the slot it claimed (lua/includes/pace-take.lua):
        // put back, it would wait for a fetch the queue's rate-limit switch may hold past that slot
        // (a less urgent job told to leave the slot to it sets the switch for the whole queue).
        const urgent = priority === PRIORITY.interactive;
        if (slot.reason === 'hold' || (slot.waitMs > WAIT_HERE_MS && !urgent)) return this.#later(slot.waitMs);
        // Asked again as soon as the slot is within reach (the horizon, less the margin the chained
        // asks keep), not half a horizon before it: another process whose line chains its asks
        // (#askAt: each at the wake of the slot before, one interval ahead) reserved every slot
        // first, for as long as its line had waiters, and this process sent nothing (an interactive
        // create queued behind this request waited 31-36 s in the chaos suite while the key ran at
        // its full rate). So told, the two processes take the slots in turn. Told to wait for a
        // slot already within reach, it leaves that slot to an interactive request's claim
        // (pace-take), which ends at `waitMs`: asked again 1 ms on, it asked a millisecond until
        // then when the claimer never came back. An interactive request claimed its slot: half a
        // horizon is soon enough for it.
        const reach = this.horizonMs - ASK_MARGIN_MS;
        const sleepMs = urgent
          ? slot.waitMs - this.horizonMs / 2
          : slot.waitMs > reach
            ? slot.waitMs - reach
            : slot.waitMs;
        await this.#clock.sleep(Math.max(1, sleepMs));
      }
    } finally {
      done();
    }
  }

  /**
   * Waits until this request heads the process's queue for the account's slot. `done` passes the
   * turn on (once), with when the next waiter should ask (`askAt`, the clock's monotonic()) when the
   * request took a slot; the next waiter gets it as its `askAt`.
   */
  async #turn(
    priority: number,
    yieldsUntil?: number,
    jumps?: boolean,
  ): Promise<{ done: (askAt?: number) => void; askAt?: number }> {
    let askAt: number | undefined;
    if (this.#asking) {
      askAt = await new Promise<number | undefined>((go) => {
        const waiter: Waiter = yieldsUntil === undefined ? { priority, go } : { priority, go, yieldsUntil };
        if (jumps) waiter.jumps = true;
        insertBy(this.#waiters, waiter, 'priority');
        if (yieldsUntil !== undefined) this.#yieldEnds = Math.min(this.#yieldEnds, yieldsUntil);
      });
    } else this.#pollHadTurn = priority === PRIORITY.poll;
    this.#asking = true;
    let passed = false;
    const done = (following?: number) => {
      if (passed) return;
      passed = true;
      // No clock read per request unless a yielding poll waits.
      if (this.#yieldEnds !== Number.POSITIVE_INFINITY && this.#yieldEnds <= this.#now()) this.#unyield();
      const next = this.#nextWaiter();
      if (next) {
        // Its place now: a yielding poll's became a poll's (#unyield).
        this.#pollHadTurn = next.priority === PRIORITY.poll;
        next.go(following);
      } else this.#asking = false;
    };
    return askAt === undefined ? { done } : { done, askAt };
  }

  /**
   * The waiter whose turn is next: the head of the line, except that while polls head it and a
   * poll had the last turn, a newcomer batch's first create (fed as it was submitted:
   * queue/feeder.ts, at account-queues.ts freshPriority) waiting behind them takes this one. Polls
   * strictly first held it for as long as a large batch's polls came due together, about an
   * answer time after that batch's creates went at the key's rate: 9.3 s from submit to create
   * for a 1-plate batch beside a 5,000-plate one (bench `--only interactive`). Every create so
   * alternating kept more queries paid and unread (a cold-gate run left 68 plates on the pool's
   * expired key; 10-42 without, 35 with this rule). Not while the in-flight cap
   * refuses creates (#createsRefusedUntil): it would only be refused again.
   */
  #nextWaiter(): Waiter | undefined {
    const head = this.#waiters[0];
    if (head === undefined) return undefined;
    if (head.priority === PRIORITY.poll && this.#pollHadTurn && this.#createsRefusedUntil <= this.#clock.monotonic()) {
      const i = this.#waiters.findIndex((w) => w.jumps === true);
      if (i > 0) return this.#waiters.splice(i, 1)[0];
    }
    return this.#waiters.shift();
  }

  /**
   * The yielding polls waiting in the line whose batch's creates stopped closing take a poll's
   * place, before every create. Their place was set once, when they joined the line, so without
   * this a steady stream of other batches' creates kept them waiting as long as it lasted: a
   * batch of 80 plates whose last creates closed while two larger batches were fed had 36 of its
   * polls wait 21 s (its deadline 9 s), until the others' creates ran out (deadlines.test.ts).
   */
  #unyield(): void {
    const now = this.#now();
    const ended = this.#waiters.filter((w) => w.yieldsUntil !== undefined && w.yieldsUntil <= now);
    for (const waiter of ended) {
      this.#waiters.splice(this.#waiters.indexOf(waiter), 1);
      delete waiter.yieldsUntil;
      waiter.priority = PRIORITY.poll;
      insertBy(this.#waiters, waiter, 'priority');
    }
    this.#yieldEnds = Math.min(
      Number.POSITIVE_INFINITY,
      ...this.#waiters.map((w) => w.yieldsUntil ?? Number.POSITIVE_INFINITY),
    );
  }

  /**
   * When the next waiter asks for the slot after this one (`next`, its start at the soonest): at
   * this request's own wake for its slot (`due`), when that slot is within the horizon by then (one
   * slot on: an interval apart), so the two share one wake-up of the process; else half a horizon
   * before it. The ask at half a horizon was a timer of its own a few ms after this request's
   * (30/s: 6.8 ms), a wake-up a request (a cold 300-plate batch: 4.8 timer wake-ups a plate, 1.8
   * of them these; 3.6 since, strace).
   */
  #askAt(due: number, next: number): number {
    return next - due <= this.horizonMs - ASK_MARGIN_MS ? due : next - this.horizonMs / 2;
  }

  /**
   * Resolves when a poll due at `at` (the clock's monotonic()) may ask for its slot: at this
   * process's first wake for one of the account's slots at or after `at`, or, when none comes,
   * DUE_GRACE_MS (an interval at most) after it. A poll then shares the wake-up of a request's slot
   * instead of firing a timer of its own (a cold 300-plate batch at 30/s: 299 of its 304 polls went
   * so; the worker's CPU 9.31 → 9.04 ms a plate, seven alternated runs each); a few ms are nothing
   * beside answer times of seconds. A poll due already goes at once: the process is awake now.
   * Rejects with the signal's reason when it aborts first.
   */
  untilDue(at: number, signal?: AbortSignal): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      if (signal?.aborted) return reject(signal.reason);
      if (at <= this.#clock.monotonic()) return resolve();
      let timer: NodeJS.Timeout | undefined;
      const settle = () => {
        this.#clock.clearTimeout(timer);
        const i = this.#due.indexOf(entry);
        if (i >= 0) this.#due.splice(i, 1);
        if (signal) this.#dueAborts.get(signal)?.delete(abort);
      };
      const entry = {
        at,
        go: () => {
          settle();
          resolve();
        },
      };
      const abort = () => {
        settle();
        reject(signal!.reason);
      };
      insertBy(this.#due, entry, 'at');
      const grace = Math.min(DUE_GRACE_MS, 1_000 / this.#rate);
      timer = this.#clock.setTimeout(entry.go, Math.max(0, at - this.#clock.monotonic()) + grace);
      if (signal) this.#onAbort(signal).add(abort);
    });
  }

  /**
   * The polls waiting on `signal` (untilDue), aborted together by one listener of the signal's own:
   * a listener each (up to the poll room's size on the worker's one stop signal) cost a walk of the
   * signal's listeners at every add and remove (1.5 % of the samples of a V8 profile of a cold
   * batch's worker).
   */
  #onAbort(signal: AbortSignal): Set<() => void> {
    let waiting = this.#dueAborts.get(signal);
    if (!waiting) {
      const set = new Set<() => void>();
      waiting = set;
      this.#dueAborts.set(signal, set);
      signal.addEventListener(
        'abort',
        () => {
          for (const abort of [...set]) abort();
        },
        { once: true },
      );
    }
    return waiting;
  }

  /** The polls come due by now go (untilDue): this process is awake for one of the account's slots. */
  #wakeDue(): void {
    const now = this.#clock.monotonic();
    while (this.#due.length > 0 && this.#due[0]!.at <= now) this.#due[0]!.go();
  }

  /**
   * The pacing of one request, for the upstream client: `ready` just before it is handed over,
   * `written` when its bytes leave. A request written later than half the jitter allowance after
   * its slot (a connection opened first: TCP and TLS handshakes; a stalled event loop) moves the
   * account's schedule back by the excess, so the request N slots after it still reaches a sliding
   * window a whole window later (a 429 on the 21st request of a 20/s key otherwise).
   */
  send(admission: Extract<Admission, { go: true }>, heldMs?: number): SendOptions {
    let slot: { due: number; at: string } | undefined;
    return {
      ready: async () => {
        slot = await spanned(SPAN.slotWait, { 'vqb.slot.phase': 'send' }, () => this.#ready(admission, heldMs));
      },
      written: () => {
        if (slot) this.#written(slot);
      },
    };
  }

  #written({ due, at }: { due: number; at: string }): void {
    const excess = this.#clock.monotonic() - due - jitterAllowanceMs(this.#windowMs, this.#d.jitterMs) / 2;
    if (excess <= 0) return;
    this.#d.logger.debug(
      { account: this.accountId, lateMs: Math.round(excess) },
      'request written late; pace moved back',
    );
    this.#d.line.shift(at, excess).catch((err: unknown) => {
      this.#d.logger.warn({ err, account: this.accountId }, 'could not move the pace back after a late request');
    });
  }

  /**
   * How late a request may still be sent on its own slot (SEND_LATE_FROM_INTERVAL_MS): on a key
   * paced a second or more apart, up to an interval, and no later than lets the move of the
   * schedule land before the slot N on can be taken (slots are taken up to a horizon ahead).
   */
  #sendLateWithinMs(): number {
    const intervalMs = 1_000 / this.#rate;
    if (intervalMs < SEND_LATE_FROM_INTERVAL_MS) return 0;
    return Math.min(intervalMs, this.#windowMs - this.horizonMs - SEND_LATE_MOVE_MS);
  }

  /**
   * Called right before the request is handed to the upstream client. A request later than half
   * the jitter allowance (a busy event loop, a slow Redis reply) is not sent late: it would crowd
   * the window against the one N slots after it. It takes the account's next slot instead (a slot
   * lost, rarely; a 429 never), unless its slot is an early one or its key is paced a second or
   * more apart (SEND_LATE_FROM_INTERVAL_MS: sent late, the schedule moved back by its write). A
   * hold that started meanwhile (a 429 elsewhere) is waited out here.
   */
  async #ready(admission: Extract<Admission, { go: true }>, heldMs?: number): Promise<{ due: number; at: string }> {
    let { due, at, early } = admission;
    // A hold read by the write made just before this (a create's fence: `heldMs`) holds for the
    // first look, unless the request must take another slot first.
    let known = heldMs;
    for (;;) {
      while (this.#clock.monotonic() - due > jitterAllowanceMs(this.#windowMs, this.#d.jitterMs) / 2) {
        // A slot taken before any limit was heard is not given up for lateness: the next such slot
        // is 1.5 s away (a new account's first request went 1.5-4.5 s after its batch so, woken
        // 14-33 ms late by its fence's round trip). The write moves its start in the early list.
        if (early && this.#clock.monotonic() - due < EARLY_LATE_MS) break;
        // (Not after a hold: `due` is then -Infinity, and the request must take a slot on the
        // schedule the hold moved. Nor later than an interval, a worker paused or a Redis that
        // stalled: the move would hold the account back longer than the slot it saves.)
        if (!early && this.#clock.monotonic() - due <= this.#sendLateWithinMs()) break;
        known = undefined;
        const givenUp = at;
        const slot = await this.#slot<never>(admission.priority, (horizonMs, urgent) =>
          this.#d.line.slot(horizonMs, givenUp, urgent),
        );
        if ('why' in slot) {
          // Paused or held meanwhile: asking again every millisecond until someone resumes would
          // keep the job at work and the Worker from closing.
          if (slot.stopped) throw new StoppedBeforeSendError(this.accountId);
          await this.#clock.sleep(Math.max(1, slot.retryInMs));
        } else ({ due, at, early } = slot);
      }
      // A hold set while this request slept for its slot (a 429 another request drew) is waited
      // out here, then the request takes a slot on the schedule the hold moved. The process hears
      // of holds as they are set (holdNews); only while that news may be incomplete does it ask.
      const held = known ?? this.#d.holdNews?.heldFor(this.accountId) ?? (await this.#d.line.heldFor());
      known = undefined;
      if (held <= 0) {
        // A key failure heard since this request took its slot (heardKeyFailure): it is not sent
        // with a key the upstream just refused. No Redis call unless one was heard.
        if (this.#keyPause !== undefined && (await this.keyPaused())) throw new StoppedBeforeSendError(this.accountId);
        return { due, at };
      }
      await this.#clock.sleep(held);
      due = -Infinity;
    }
  }

  /**
   * The next slot is beyond the horizon: no worker asks again until it is half a horizon away, so
   * the one that then reserves it still has half a horizon to wake and send, and the few that ask
   * in between do not churn the queue once per millisecond.
   */
  #later(waitMs: number, stopped?: true): Extract<Admission, { why: 'later' }> {
    const retryInMs = Math.max(1, waitMs - this.horizonMs / 2);
    return stopped ? { go: false, why: 'later', retryInMs, stopped } : { go: false, why: 'later', retryInMs };
  }

  /**
   * A create: the in-flight cap, then the pace, then the spending caps, in one Redis step
   * (queue/admission.ts) that takes nothing unless all three say yes. The cap comes first: a
   * create that waited in the worker for its slot and was then refused by the cap would have
   * held a worker slot the polls that drain the pipeline need, and wasted the account's slot.
   */
  admitCreate(jobId: string, data: PlateJobData, fresh = false): Promise<Admission> {
    return spanned(SPAN.slotWait, { 'vqb.slot.phase': 'admission' }, () => this.#admitCreate(jobId, data, fresh)).then(
      verdict,
    );
  }

  async #admitCreate(jobId: string, data: PlateJobData, fresh: boolean): Promise<Admission> {
    const priority = createPriority(data.cls);
    // First contact: one create in flight until one plate was understood end to end.
    const cap = (await this.contact.meeting()) ? 1 : undefined;
    const slot = await this.#slot(
      priority,
      (horizonMs, urgent) =>
        this.#d.admission.take(jobId, data.batchId, data.plate, horizonMs, this.#now(), cap, urgent, data.account),
      undefined,
      fresh && data.cls === 'normal',
    );
    if ('refused' in slot) {
      if (slot.refused === 'finished') return { go: false, why: 'finished' };
      // Polls (a higher priority) drain the pipeline meanwhile.
      if (slot.refused === 'inflight') {
        const retryInMs = Math.max(this.#d.line.intervalMs, 250);
        this.#createsRefusedUntil = this.#clock.monotonic() + retryInMs;
        return { go: false, why: 'inflight', retryInMs };
      }
      return { go: false, why: 'cap', heldBy: slot.refused, until: await this.#holdAtCap(data, slot.refused) };
    }
    if ('why' in slot) return slot;
    return { go: true, ...slot, priority };
  }

  /** A create this worker reserved and never sent (another worker holds the job): its cap unit only. */
  async refundCap(data: PlateJobData): Promise<void> {
    await this.#d.budget.refund(this.accountId, data.batchId, data.account);
  }

  /** A create that certainly did not happen gives back its in-flight slot and its cap unit. */
  async refundCreate(jobId: string, data: PlateJobData): Promise<void> {
    await this.#d.inflight.release(this.accountId, jobId, data.batchId);
    await this.#d.budget.refund(this.accountId, data.batchId, data.account);
  }

  /**
   * After any answer: feeds the learned rate (`auto`, or a configured rate the upstream
   * refused), and when the upstream says the budget is gone until a reset further away than one
   * rate window (a daily quota), holds the account until
   * then instead of drawing 429s. Resets within the window are left to the pacing: at steady
   * state a smooth pace runs the window's budget to 0 on every request, and X-RateLimit-Reset
   * has whole-second precision (holding until it cost 40 % of the pace in the benchmark).
   */
  async onAnswer(quota: QuotaSnapshot | undefined, log: Logger): Promise<void> {
    await this.reached(log);
    if (this.#inStreak) {
      this.#inStreak = false;
      await this.#d.line.streak(true);
    }
    const now = this.#now();
    this.#metrics.quota(this.accountId, quota);
    if (this.#d.line.account.pool !== undefined) await this.#d.pools?.observe(this.accountId, quota);
    await this.#learnFrom(quota, log);
    if (quota?.remaining !== 0 || quota.resetAt === undefined) return;
    const wait = quota.resetAt - now;
    // The window in force: for `auto`, the one the upstream announced (a minute), not the 1 s of
    // the start rate; read against that, a 12/min key held on every answer at its limit (issue 21).
    // The start rate's slots are counted when the limit is first heard (pace-learn), so the pace
    // alone keeps any window to its limit. +1 s: X-RateLimit-Reset is whole seconds, so a slot
    // freeing 50 ms from now may read as a reset up to a second later.
    if (wait <= this.#windowMs + 1_000) return;
    const reason: LimitReason = wait > QUOTA_WAIT_MS ? 'quota' : 'rate_limit';
    if (await this.#d.line.hold(wait, reason)) {
      this.#metrics.waited(this.accountId, reason, wait);
      const fields = {
        event: 'account.hold',
        cause: 'budget_used_up',
        account: this.accountId,
        waitMs: wait,
        reason,
        until: new Date(quota.resetAt).toISOString(),
      };
      log.info(fields, 'upstream budget used up: the account holds until it resets');
    }
  }

  /**
   * `auto`: feeds an answer to the account's learned rate. At most every half second per process
   * (it moves every 2 s at most), at once when the announced limit changes (a plan changed).
   */
  async #learnFrom(quota: QuotaSnapshot | undefined, log: Logger): Promise<void> {
    const line = this.#d.line;
    if (!line.auto) this.#checkConfigured(quota, log);
    const now = this.#now();
    const limit = quota !== undefined && now - quota.observedAt < 5_000 ? quota.limit : undefined;
    if (now - this.#learned.at < 500 && limit === this.#learned.limit) return;
    this.#learned.at = now;
    this.#learned.limit = limit;
    const rate = await line.learn('ok', limit !== undefined ? quota : undefined, this.#d.jitterMs);
    this.#metrics.rate?.(this.accountId, rate.perSecond, rate.source);
    this.#logRate(rate, log);
  }

  #logRate(rate: { perSecond: number; source: string; windowMs?: number; changed: boolean }, log: Logger): void {
    this.#rate = rate.perSecond;
    this.#windowMs = rate.windowMs ?? this.#d.line.account.rateLimit.durationMs;
    if (!rate.changed) return;
    const fields = {
      event: 'account.rate',
      account: this.accountId,
      perSecond: Math.round(rate.perSecond * 100) / 100,
      source: rate.source,
      ...(rate.windowMs ? { windowMs: rate.windowMs } : {}),
    };
    // One line when where the rate comes from changes (or the upstream announces another limit);
    // the learning steps at debug.
    if (rate.source !== this.#learned.source || rate.source === 'announced')
      log.info(fields, `rate in force: ${fields.perSecond}/s (${rate.source})`);
    else log.debug(fields, 'learned rate moved');
    this.#learned.source = rate.source;
  }

  /** A configured rate far above or below what the upstream announces is one warning with the value to set. */
  #checkConfigured(quota: QuotaSnapshot | undefined, log: Logger): void {
    if (this.#warnedConfigured || quota?.limit === undefined) return;
    const configured = this.#d.line.account.rateLimit;
    const announcedPerS =
      quota.windowMs !== undefined
        ? (quota.limit * 1_000) / quota.windowMs
        : (quota.limit * 1_000) / configured.durationMs;
    const configuredPerS = (configured.max * 1_000) / configured.durationMs;
    if (configuredPerS <= announcedPerS * 1.05 && configuredPerS >= announcedPerS * 0.5) return;
    this.#warnedConfigured = true;
    const windowMs = quota.windowMs ?? configured.durationMs;
    const unit = windowMs === 1_000 ? 's' : windowMs === 60_000 ? 'min' : `${windowMs / 1_000}s`;
    const suggestion = `${quota.limit}/${unit}`;
    const above = configuredPerS > announcedPerS;
    const fields = {
      event: 'account.rate_mismatch',
      account: this.accountId,
      configured: configured.text,
      announced: suggestion,
    };
    const message =
      `the configured rate ${configured.text} is far ${above ? 'above' : 'below'} the ` +
      `${quota.limit} requests per window the upstream announces: set ${suggestion} (or auto, to follow it)`;
    // Above: 429s until vqb learns its way down. Below: the key is under-used, which may be a
    // choice (headroom for other users of the key).
    if (above) log.warn(fields, message);
    else log.info(fields, message);
  }

  /**
   * A request got no answer it could use (refused, timed out, reset, a 5xx). Every process adds to
   * one count on the account's line; the one whose failure reaches UNREACHABLE_AFTER logs one
   * warning, and status, /healthz, the console and vqb_line_waiting{reason="upstream_unreachable"} say so.
   */
  async onUnreachable(err: AnyUpstreamError, log: Logger): Promise<void> {
    this.#reach.failed = true;
    const reason = unreachableReason(err);
    const { since, attempts } = await this.#d.line.upstreamFailed(reason);
    if (attempts !== UNREACHABLE_AFTER) return;
    const fields = {
      event: 'upstream.unreachable',
      since: new Date(since).toISOString(),
      attempts,
      reason,
      baseUrl: this.#d.line.account.baseUrl,
    };
    log.warn(
      fields,
      `upstream unreachable since ${dateText(since, this.#now())}: ${reason}; retrying, attempt ${attempts}`,
    );
  }

  /**
   * The upstream answered (anything, a 429 or a key failure included): an outage ends. Asked at
   * once after this process saw a failure, else at most every REACH_CHECK_MS (another process's
   * outage ends by the first answer anyone gets; one Redis call per process every few seconds).
   */
  async reached(log: Logger): Promise<void> {
    const now = this.#now();
    if (!this.#reach.failed && now - this.#reach.checkedAt < REACH_CHECK_MS) return;
    this.#reach = { failed: false, checkedAt: now };
    const ended = await this.#d.line.upstreamAnswered();
    if (ended === undefined || ended.attempts < UNREACHABLE_AFTER) return;
    const fields = {
      event: 'upstream.reachable',
      since: new Date(ended.since).toISOString(),
      downMs: now - ended.since,
      attempts: ended.attempts,
    };
    log.info(
      fields,
      `upstream reachable again after ${spanText(now - ended.since)} unreachable (${ended.attempts} ` +
        `failed attempts: ${ended.reason})`,
    );
  }

  /** A 429: the whole account holds for Retry-After (or a shared backoff), and its spacing widens. */
  /** `slot`: the refused request's slot (its `at`), which tells the learner under which rate it was paced. */
  async onRateLimited(err: RateLimitedError, reason: LimitReason, log: Logger, slot?: string): Promise<void> {
    if (this.#d.line.account.pool !== undefined) this.#d.pools?.limited(this.accountId);
    let ms = err.retryAfterMs ?? (await this.#noHintBackoff());
    if (reason === 'rate_limit') {
      const rate = await this.#d.line.learn('429', undefined, this.#d.jitterMs, slot);
      this.#metrics.rate?.(this.accountId, rate.perSecond, rate.source);
      this.#logRate(rate, log);
      ms = rateLimitHoldMs(ms, rate);
    }
    if (await this.#d.line.hold(ms, reason)) {
      this.#metrics.waited(this.accountId, reason, ms);
      const fields = {
        event: 'account.hold',
        cause: 'rate_limited',
        account: this.accountId,
        code: err.code,
        waitMs: ms,
        reason,
        until: new Date(this.#now() + ms).toISOString(),
        ratePerSecond: Math.round(this.#rate * 100) / 100,
      };
      // A sub-second wait is the learned rate at work, not news; a longer one is a decision.
      if (ms >= 1_000) log.warn(fields, 'upstream asked to wait: the account holds');
      else log.debug(fields, 'upstream asked to wait');
    }
    await this.#d.line.stopTaking(ms);
  }

  /** Paused for its key or held for an answer, as this process knows it: a request sends nothing. */
  async stopped(): Promise<boolean> {
    return (await this.keyPaused()) || (await this.contact.heldForAnswer());
  }

  /**
   * Whether the account is paused for a key failure, as this process knows it: asked before a
   * request waits for its slot. No Redis call unless a request of this process failed on the key;
   * then one a second at most, to hear a resume.
   */
  async keyPaused(): Promise<boolean> {
    const pause = this.#keyPause;
    if (pause === undefined) return false;
    if (this.#now() - pause.checkedAt < 1_000) return true;
    pause.checkedAt = this.#now();
    if ((await this.#d.line.state()).pause !== undefined) {
      delete pause.heard;
      return true;
    }
    this.#keyPause = undefined;
    return false;
  }

  /**
   * An answer of this account's was just read as a key failure (401, 403: workers/actions.ts
   * `pause-account`), told by the upstream client as it reads it: from now on no request of this
   * process leaves (#ready, stopped), before the pause is recorded (onKeyFailure, a create's
   * refund and fence and the pause's own round trip later). Those requests were sent meanwhile,
   * each refused in turn: 4 where 3 were allowed in a loaded CI run of key-pools.test.ts. A
   * failure heard but never recorded (sent before a resume) stops nothing once keyPaused() next
   * asks Redis, a second on at most.
   */
  heardKeyFailure(): void {
    this.#keyPause ??= { checkedAt: this.#now(), heard: true };
  }

  /** A key failure: the account pauses for every worker, once, with what to do. */
  async onKeyFailure(err: AnyUpstreamError, log: Logger): Promise<void> {
    const advice = adviceFor(err, this.accountId);
    const verdict = await this.#d.line.pause(err.code, `${err.message} — ${advice}`, err.sentAt);
    // Sent before the account resumed: it lifts a failure only heard (heardKeyFailure), never a
    // pause recorded since the resume (the account may be paused again).
    if (verdict !== 'before-resume') this.#keyPause = { checkedAt: this.#now() };
    else if (this.#keyPause?.heard) this.#keyPause = undefined;
    if (verdict === 'before-resume') {
      // Sent with the key as it was before the operator fixed it: the job goes back and is sent again.
      log.info(
        { account: this.accountId, code: err.code },
        'a request sent before the account resumed failed on its key: sent again, the account stays running',
      );
      return;
    }
    if (verdict === 'recorded') {
      this.#metrics.waited(this.accountId, 'key', 0);
      log.fatal(
        { event: 'account.paused', account: this.accountId, code: err.code, status: err.status },
        `account paused: ${advice}`,
      );
      await this.#d.onPaused?.(this.accountId);
    }
  }

  /** No worker takes the account's jobs for `ms` (the job that asked goes back to the queue). */
  async stopTaking(ms: number): Promise<void> {
    await this.#d.line.stopTaking(ms);
  }

  /**
   * A spending cap is reached: the plate waits, it never fails. A batch cap takes the batch out
   * of the scheduler until the cap is raised; an account cap holds every create of the account
   * (the feeder stops) until the UTC reset. Returns until when the job should sleep.
   */
  async #holdAtCap(data: PlateJobData, verdict: 'batch' | 'day' | 'month'): Promise<number> {
    const log = this.#d.logger.child({ account: this.accountId, batchId: data.batchId });
    if (verdict === 'batch') {
      if (await this.#d.budget.setHeld({ id: data.batchId, account: data.account }, true)) {
        await this.#d.scheduler.delist(data.account, data.batchId, data.cls);
        log.info('batch reached its create cap: its remaining creates wait until the cap is raised (vqb budget)');
      }
      return this.#now() + BATCH_CAP_HOLD_MS;
    }
    const until = this.#d.budget.resetsAt(verdict);
    if (await this.#d.line.holdCreates(until, verdict)) {
      this.#metrics.waited(this.accountId, 'budget', until - this.#now());
      log.info(
        { reason: verdict, until: new Date(until).toISOString() },
        `spending cap per ${verdict} reached: the account's creates wait for the reset (polls go on)`,
      );
    }
    return until;
  }

  async #noHintBackoff(): Promise<number> {
    this.#inStreak = true;
    const streak = await this.#d.line.streak();
    return backoffDelay(streak - 1, 1_000, 5 * 60_000, this.#random);
  }
}

/** Tracing: what the admission said, on the create's or poll's span (go, later, inflight, cap, finished). */
function verdict<A extends Admission>(admission: A): A {
  annotate({ 'vqb.slot.verdict': admission.go ? 'go' : admission.why });
  return admission;
}

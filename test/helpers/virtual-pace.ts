// The pace on a clock the test owns (issue 45): an account's line (queue/line.ts) whose scripts
// read the test's `now` instead of Redis TIME, driven by virtual requesters that ask for slots,
// "send" at their slot's start and hear an answer some virtual ms later. Thousands of slots run in
// about a second of real time, with no sleeps; a run's sends are then checked against the limit.

import type { Account } from '../../src/accounts/account.js';
import type { Config } from '../../src/config.js';
import { openAccountQueue } from '../../src/queue/account-queues.js';
import { AccountLine } from '../../src/queue/line.js';
import type { RedisClient } from '../../src/redis/connection.js';
import { VqbKeys } from '../../src/redis/keys.js';
import { type Limiter, retryAfterSeconds } from '../../src/simulator/limiter.js';
import type { RateLimitHeaders } from '../../src/upstream/timing.js';
import { rateLimitHoldMs } from '../../workers/flow.js';

/** A test's clock: `now` is whatever the test set last. */
export class VirtualClock {
  now: number;
  constructor(start = 1_800_000_000_000) {
    this.now = start;
  }
}

/** The account's line, its scripts on `clock` (production never passes one: Redis TIME). */
export function virtualLine(config: Config, redis: RedisClient, account: Account, clock: VirtualClock): AccountLine {
  const queue = openAccountQueue(config, account.id, redis);
  const read = () => clock.now;
  return new AccountLine(account, queue, redis, new VqbKeys(config), config.pacingJitterMs, read, {
    scriptNow: read,
  });
}

/** Slots taken one after another (a long horizon: each is reserved), each's wait, ms. */
export async function takeSlots(line: AccountLine, n: number): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i += 1) {
    const slot = await line.slot(120_000);
    if (!slot.reserved) throw new Error(`slot ${i + 1} of ${n} not reserved: ${JSON.stringify(slot)}`);
    out.push(slot.waitMs);
  }
  return out;
}

/** The most sends in any window of `windowMs` (sliding: a window may start at any send). */
export function mostInWindow(sends: readonly number[], windowMs: number): number {
  const sorted = [...sends].sort((a, b) => a - b);
  let most = 0;
  let first = 0;
  for (let last = 0; last < sorted.length; last++) {
    while (sorted[last]! - sorted[first]! >= windowMs) first++;
    most = Math.max(most, last - first + 1);
  }
  return most;
}

export interface PaceRun {
  /** When each request the upstream took was sent (its slot's start), virtual epoch ms. */
  sends: number[];
  /** When each request the upstream refused (429) was sent. */
  refusedAt: number[];
  /** How many were refused. */
  refused: number;
  /** The rate in force each time an answer changed it: [virtual epoch ms, per second]. */
  rates: [number, number][];
}

/**
 * The upstream as the simulator limits it (src/simulator/limiter.ts, the same windows), on the
 * test's clock: `limiter(now)` is the limit in force then (a test may change it mid-run);
 * `announce`: its answers carry the limit (X-RateLimit-*), else they say nothing.
 */
export interface VirtualUpstream {
  limiter: (now: number) => Limiter;
  announce: boolean;
  jitterMs: number;
}

/**
 * `workers` requesters share the account for `durationMs` of virtual time (requester w asks
 * through `lines[w % lines.length]`: one line a process, each its own connection): each asks for a
 * slot (horizon `horizonMs`), waits for it, sends, and asks again once its answer came `answerMs`
 * later. With `upstream`, each answer is fed to the line as a worker feeds it (workers/flow.ts):
 * `learn('ok', what it announced)`; a 429 is `learn('429')` and a hold for its Retry-After (a
 * learned rate's sub-second wait shortened as the flow shortens it).
 */
export async function runPace(
  line: AccountLine | AccountLine[],
  clock: VirtualClock,
  options: {
    workers: number;
    durationMs: number;
    horizonMs?: number;
    answerMs?: (i: number) => number;
    upstream?: VirtualUpstream;
  },
): Promise<PaceRun> {
  const lines = Array.isArray(line) ? line : [line];
  const start = clock.now;
  const horizonMs = options.horizonMs ?? 500;
  const answerMs = options.answerMs ?? ((i: number) => 80 + ((i * 37) % 120));
  const upstream = options.upstream;
  type Answer = { ok: true; said?: RateLimitHeaders } | { ok: false; retryAfterMs: number; slot: string };
  // Each requester's next step: ask for a slot, after hearing its last answer if it had one.
  const due: { at: number; worker: number; answer?: Answer }[] = [];
  for (let w = 0; w < options.workers; w++) due.push({ at: start + w, worker: w });
  const run: PaceRun = { sends: [], refusedAt: [], refused: 0, rates: [] };
  let n = 0;
  while (due.length > 0) {
    due.sort((a, b) => a.at - b.at);
    const step = due.shift()!;
    if (step.at > start + options.durationMs) break;
    clock.now = step.at;
    const mine = lines[step.worker % lines.length]!;
    if (step.answer && upstream) {
      const rate = await hear(mine, step.answer, upstream.jitterMs);
      if (rate.changed) run.rates.push([clock.now, rate.perSecond]);
    }
    const slot = await mine.slot(horizonMs);
    if (!slot.reserved) {
      due.push({ at: clock.now + Math.max(1, slot.waitMs), worker: step.worker });
      continue;
    }
    const sentAt = clock.now + slot.waitMs;
    let answer: Answer = { ok: true };
    if (upstream) {
      const limiter = upstream.limiter(sentAt);
      const state = limiter.peek(sentAt);
      if (state.retryAfterMs > 0) {
        run.refusedAt.push(sentAt);
        run.refused++;
        answer = { ok: false, retryAfterMs: retryAfterSeconds(state.retryAfterMs) * 1_000, slot: slot.at };
      } else {
        const taken = limiter.take(sentAt);
        run.sends.push(sentAt);
        answer = upstream.announce
          ? {
              ok: true,
              said: {
                limit: limiter.max,
                windowMs: limiter.durationMs,
                remaining: taken.remaining,
                resetAt: taken.resetAtMs,
              },
            }
          : { ok: true };
      }
    } else run.sends.push(sentAt);
    due.push({ at: sentAt + answerMs(++n), worker: step.worker, answer });
  }
  return run;
}

/** What a worker does with an answer (workers/flow.ts onAnswer, onRateLimited), on the line. */
async function hear(
  line: AccountLine,
  answer: { ok: true; said?: RateLimitHeaders } | { ok: false; retryAfterMs: number; slot: string },
  jitterMs: number,
) {
  if (answer.ok) return line.learn('ok', answer.said, jitterMs);
  const rate = await line.learn('429', undefined, jitterMs, answer.slot);
  await line.hold(rateLimitHoldMs(answer.retryAfterMs, rate), 'rate_limit');
  return rate;
}

/** Requests taken per second between `from` and `to` (virtual epoch ms). */
export function perSecond(sends: readonly number[], from: number, to: number): number {
  return (sends.filter((at) => at >= from && at < to).length * 1_000) / (to - from);
}

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
import type { RateLimitHeaders } from '../../src/upstream/timing.js';

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
  /** When each request was sent (its slot's start), virtual epoch ms. */
  sends: number[];
  /** Requests the upstream would have refused (429): over `limit` in its fixed window. */
  refused: number;
}

/**
 * `workers` requesters share the line for `durationMs` of virtual time: each asks for a slot
 * (horizon `horizonMs`), waits for it, sends, and asks again once its answer came `answerMs` later.
 * With `upstream`, each answer carries the limit as an upstream announces it (a fixed window from
 * the first send) and is fed to the line's learner, as a worker does (workers/flow.ts).
 */
export async function runPace(
  line: AccountLine,
  clock: VirtualClock,
  options: {
    workers: number;
    durationMs: number;
    horizonMs?: number;
    answerMs?: (i: number) => number;
    upstream?: { limit: number; windowMs: number; jitterMs: number };
  },
): Promise<PaceRun> {
  const start = clock.now;
  const horizonMs = options.horizonMs ?? 500;
  const answerMs = options.answerMs ?? ((i: number) => 80 + ((i * 37) % 120));
  // Each requester's next step: ask for a slot, or hear its answer.
  const due: { at: number; worker: number; answerOf?: number }[] = [];
  for (let w = 0; w < options.workers; w++) due.push({ at: start + w, worker: w });
  const sends: number[] = [];
  let refused = 0;
  const windowCount = new Map<number, number>();
  while (due.length > 0) {
    due.sort((a, b) => a.at - b.at);
    const step = due.shift()!;
    if (step.at > start + options.durationMs) break;
    clock.now = step.at;
    if (step.answerOf !== undefined && options.upstream) {
      const { limit, windowMs, jitterMs } = options.upstream;
      const sentAt = step.answerOf;
      const windowStart = start + Math.floor((sentAt - start) / windowMs) * windowMs;
      const used = windowCount.get(windowStart) ?? 0;
      const said: RateLimitHeaders = {
        limit,
        windowMs,
        remaining: Math.max(0, limit - used),
        resetAt: windowStart + windowMs,
      };
      await line.learn('ok', said, jitterMs);
    }
    const slot = await line.slot(horizonMs);
    if (!slot.reserved) {
      due.push({ at: clock.now + Math.max(1, slot.waitMs), worker: step.worker });
      continue;
    }
    const sentAt = clock.now + slot.waitMs;
    sends.push(sentAt);
    if (options.upstream) {
      const windowStart = start + Math.floor((sentAt - start) / options.upstream.windowMs) * options.upstream.windowMs;
      const used = (windowCount.get(windowStart) ?? 0) + 1;
      windowCount.set(windowStart, used);
      if (used > options.upstream.limit) refused++;
    }
    due.push({ at: sentAt + answerMs(sends.length), worker: step.worker, answerOf: sentAt });
  }
  return { sends, refused };
}

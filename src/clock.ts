// The one place vqb reads the time and sets its timers (issue 45): every `now`, monotonic
// reading, sleep and timer of src/ and workers/ goes through a Clock, so a test can tell what a
// module asks of time. services.ts holds the one a process runs on (`clock` below unless a test
// hands its own) and hands it down: the stores, the feeder, the scheduler and the line take its
// `now`; the worker process's parts (its flows, processor, recorder, doorbell and housekeeping)
// take it whole. What every machine must agree on is not here: the pace, the hold and the learner
// read Redis TIME in their scripts (src/redis/lua/includes/pace-take.lua), and only a test hands
// them a time of its own (test/integration/pace-clock.test.ts).
// test/unit/clock.test.ts holds that no other module reads Date.now or performance.now, sets a
// timer itself or sleeps with node:timers.

import { setTimeout as sleepFor } from 'node:timers/promises';

export interface Clock {
  /** Epoch ms, the wall clock (what is stored and shown). */
  now(): number;
  /** A monotonic reading in ms (what durations and lateness are measured with). */
  monotonic(): number;
  /** Runs `run` once after `ms` (a promise's `resolve` will do: its argument is left unset). */
  setTimeout(run: (...args: never[]) => unknown, ms: number): NodeJS.Timeout;
  setInterval(run: () => unknown, ms: number): NodeJS.Timeout;
  /** Cancels a timer or an interval this clock set (none: nothing). */
  clearTimeout(timer: NodeJS.Timeout | undefined): void;
  /** Resolves after `ms`; rejects with the signal's reason when it aborts first. */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

/**
 * A time already past waits 0 ms: Node would wait 1 ms anyway, but print a TimeoutNegativeWarning
 * to the process's stderr (seen once in a test run, where a wait was computed from a time past).
 * One beyond Node's longest timer (about 24.8 days) waits that long: Node would fire it after 1 ms,
 * with a TimeoutOverflowWarning.
 */
const delay = (ms: number) => Math.min(Math.max(0, ms), 2_147_483_647);

export const clock: Clock = {
  now: () => Date.now(),
  monotonic: () => performance.now(),
  setTimeout: (run, ms) => setTimeout(run as () => unknown, delay(ms)),
  setInterval: (run, ms) => setInterval(run, ms),
  clearTimeout: (timer) => clearTimeout(timer),
  sleep: (ms, signal) => sleepFor(delay(ms), undefined, signal ? { signal } : undefined),
};

/** The process's clock with another wall time (a test's `now`), or `clock` itself. */
export function clockWith(now: (() => number) | undefined): Clock {
  return now === undefined ? clock : { ...clock, now };
}

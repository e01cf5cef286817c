// The simulator's own stalls. In a test it shares a process (and two cores) with its harness,
// worker processes and other test files, and when its event loop stalls it sees the requests that
// arrived meanwhile all at once, as if sent bunched: a sliding window then counts more than the
// client sent in any window, and answers 429. A real upstream does not stop its clock for that.
// The stats say when this process stalled, so a test can tell a 429 its client caused from one the
// stall made (refusalsNotFromStalls, below: the engine tests and the cold gate). Spans only: it changes no answer.

import { type Clock, clock as processClock } from '../clock.js';
import type { SimulatorStats, Stall } from './stats.js';

/**
 * The loop is looked at this often; a gap longer than STALL_MS between two looks is a stall. 20 ms:
 * the cold gate reads its 429s at vqb's default 25 ms allowance, so a stall of more than half of
 * it can make one (refusalsNotFromStalls). At 50 ms, a stall of 13-50 ms bunched requests unseen:
 * a gate run on a loaded 2-core machine failed on one such 429 that no recorded stall explained.
 * The longer allowances of the engine tests need stalls longer than 50 ms anyway.
 */
const TICK_MS = 10;
const STALL_MS = 20;
/** The last stalls kept (a loaded 10-minute bench run records a few thousand at most). */
const KEPT = 10_000;

export class StallWatch {
  readonly #clock: Clock;
  readonly #now: () => number;
  readonly #stalls: Stall[] = [];
  #timer: NodeJS.Timeout | undefined;
  #last = 0;

  constructor(now: () => number, clock: Clock = processClock) {
    this.#now = now;
    this.#clock = clock;
  }

  start(): void {
    this.#last = this.#now();
    this.#timer = this.#clock.setInterval(() => {
      const now = this.#now();
      if (now - this.#last > STALL_MS) {
        this.#stalls.push({ from: this.#last, to: now });
        if (this.#stalls.length > KEPT) this.#stalls.shift();
      }
      this.#last = now;
    }, TICK_MS);
    this.#timer.unref();
  }

  stop(): void {
    this.#clock.clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  list(): Stall[] {
    return this.#stalls.map((s) => ({ ...s }));
  }
}

/**
 * The 429s for a key's rate that a stall of the simulator's own event loop does not explain
 * (stats read with `times`). A stall from `from` to `to` shows the requests that arrived meanwhile
 * all at `to`: a window starting at `start` inside it counts those sent since `from`, a window
 * longer by `start - from`. The pacing spaces N requests over the window plus `allowanceMs`, half
 * of it for a request's own lateness (workers/flow.ts), so a 429 at T is the stall's when a stall holds
 * T - windowMs and began more than half the allowance before it. Any other is the client's.
 */
export function refusalsNotFromStalls(
  stats: SimulatorStats,
  allowanceMs: number,
  windowMs = 1_000,
): { unexplained: { key: string; at: number }[]; fromStalls: number } {
  if (!stats.timesByKey || !stats.stalls) throw new Error('read the stats with { times: true }');
  const unexplained: { key: string; at: number }[] = [];
  let fromStalls = 0;
  for (const [key, times] of Object.entries(stats.timesByKey))
    for (const at of times.refused) {
      const start = at - windowMs;
      // `to` is the look that saw the stall end: the requests it held were read just after it.
      const stall = stats.stalls.find(
        (s) => s.from < start && start <= s.to + TICK_MS && start - s.from > allowanceMs / 2,
      );
      if (stall) fromStalls += 1;
      else unexplained.push({ key, at });
    }
  return { unexplained, fromStalls };
}

// The simulator's own stalls. In a test it shares a process (and two cores) with its harness,
// worker processes and other test files, and when its event loop stalls it sees the requests that
// arrived meanwhile all at once, as if sent bunched: a sliding window then counts more than the
// client sent in any window, and answers 429. A real upstream does not stop its clock for that.
// The stats say when this process stalled, so a test can tell a 429 its client caused from one the
// stall made (test/helpers/engine.ts, refusalsNotFromStalls). Spans only: it changes no answer.

import { type Clock, clock as processClock } from '../clock.js';

/** The loop is looked at this often; a gap longer than STALL_MS between two looks is a stall. */
const TICK_MS = 10;
const STALL_MS = 50;
/** The last stalls kept (a long bench run has a few hundred at most). */
const KEPT = 1_000;

export interface Stall {
  /** ms since the epoch of the last look before the stall: the stall began at or after it. */
  from: number;
  /** ms since the epoch of the look after it: the requests held meanwhile were seen then. */
  to: number;
}

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
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  list(): Stall[] {
    return this.#stalls.map((s) => ({ ...s }));
  }
}

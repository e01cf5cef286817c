// A Clock the test moves (src/clock.ts): its sleeps and timers fire only when the test advances
// time, in order, so a part handed it (a flow, a processor, a doorbell) runs on virtual time while
// its Redis calls are real. `drive` runs a promise to its end: whenever the part waits on this
// clock (and on nothing else), time jumps to the next timer.
import type { Clock } from '../../src/clock.js';

interface Timer {
  at: number;
  seq: number;
  run: () => void;
  every?: number;
  /** As a Node timer's: a part that unrefs its timer (an interval that must not hold a process open) runs here too. */
  unref(): Timer;
}

export class ManualClock implements Clock {
  #now: number;
  readonly #origin: number;
  #seq = 0;
  readonly #timers: Timer[] = [];

  constructor(start = 1_800_000_000_000) {
    this.#now = start;
    this.#origin = start;
  }

  now(): number {
    return this.#now;
  }

  monotonic(): number {
    return this.#now - this.#origin;
  }

  setTimeout(run: (...args: never[]) => unknown, ms: number): NodeJS.Timeout {
    return this.#add(run as () => unknown, ms) as unknown as NodeJS.Timeout;
  }

  setInterval(run: () => unknown, ms: number): NodeJS.Timeout {
    return this.#add(run, ms, Math.max(1, ms)) as unknown as NodeJS.Timeout;
  }

  clearTimeout(timer: NodeJS.Timeout | undefined): void {
    if (timer !== undefined) this.#remove(timer as unknown as Timer);
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve, reject) => {
      if (signal?.aborted) return reject(signal.reason);
      const timer = this.#add(() => resolve(), ms);
      signal?.addEventListener('abort', () => {
        this.#remove(timer);
        reject(signal.reason);
      });
    });
  }

  /** Timers waiting to fire. */
  get pending(): number {
    return this.#timers.length;
  }

  /** Moves time on by `ms`, firing every timer due by then, in order. */
  advance(ms: number): void {
    const until = this.#now + ms;
    for (;;) {
      const next = this.#timers[0];
      if (next === undefined || next.at > until) break;
      this.#fire(next);
    }
    this.#now = until;
  }

  /** Jumps to the next timer and fires it (and any due at the same instant); false when none waits. */
  next(): boolean {
    const first = this.#timers[0];
    if (first === undefined) return false;
    const at = first.at;
    while (this.#timers[0] !== undefined && this.#timers[0].at === at) this.#fire(this.#timers[0]);
    return true;
  }

  #fire(timer: Timer): void {
    this.#remove(timer);
    this.#now = Math.max(this.#now, timer.at);
    // The same timer goes back, so an interval its own run clears (clearTimeout) stops.
    if (timer.every !== undefined) {
      timer.at += timer.every;
      timer.seq = this.#seq++;
      this.#insert(timer);
    }
    timer.run();
  }

  #add(run: () => unknown, ms: number, every?: number): Timer {
    const timer: Timer = {
      at: this.#now + Math.max(0, ms),
      seq: this.#seq++,
      run: () => void run(),
      ...(every !== undefined ? { every } : {}),
      unref() {
        return this;
      },
    };
    this.#insert(timer);
    return timer;
  }

  #insert(timer: Timer): void {
    const i = this.#timers.findIndex((t) => t.at > timer.at || (t.at === timer.at && t.seq > timer.seq));
    if (i < 0) this.#timers.push(timer);
    else this.#timers.splice(i, 0, timer);
  }

  #remove(timer: Timer): void {
    const i = this.#timers.indexOf(timer);
    if (i >= 0) this.#timers.splice(i, 1);
  }
}

/**
 * Runs `work` to its end on `clock`: each turn lets real I/O (Redis) settle; when the work then
 * waits only on the clock, time jumps to its next timer. Real time is bounded by `turns`.
 */
export async function drive<T>(clock: ManualClock, work: Promise<T>, turns = 10_000): Promise<T> {
  let settled = false;
  const watched = work.finally(() => {
    settled = true;
  });
  for (let turn = 0; !settled; turn++) {
    if (turn >= turns) throw new Error(`not settled within ${turns} turns`);
    // A few macrotask turns: a Redis reply in flight lands before time moves.
    for (let i = 0; i < 3 && !settled; i++) await new Promise((resolve) => setImmediate(resolve));
    if (!settled && clock.pending > 0) clock.next();
  }
  return watched;
}

/**
 * Awaits `work` (a worker's stop, which lets its running jobs end on `clock`) while time on `clock`
 * runs in 10 ms steps, as fast as real time. A worker's creates are paced on Redis TIME: a step
 * longer than the pacing allowance (25 ms) would make every paced send late, given up and taken
 * again, for ever (a test that closed its worker in 100 ms steps hung so).
 */
export async function runningClock<T>(clock: ManualClock, work: Promise<T>): Promise<T> {
  let done = false;
  const watched = work.finally(() => {
    done = true;
  });
  while (!done) {
    clock.advance(10);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  return watched;
}

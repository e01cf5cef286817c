// Room for polls that wait for their time in the worker (workers/processor.ts #pollAt) without
// taking the place of a job at work. A waiting poll keeps its BullMQ job active, and BullMQ counts
// every active job against the Worker's concurrency; so while polls wait here the Worker's
// concurrency is VQ_CONCURRENCY plus the polls waiting, never more. A static VQ_CONCURRENCY + 256
// let BullMQ fetch a whole batch's creates ahead of the scheduler (unfair shares between batches,
// creates taken past a batch's cap); this keeps at most VQ_CONCURRENCY jobs at work, as before.
import type { Worker } from 'bullmq';

/** Polls waiting in one account's Worker at most: each is a timer and a job lock BullMQ renews. */
const POLL_ROOM = 256;

export class PollRoom {
  readonly #base: number;
  #waiting = 0;
  #worker: Worker | undefined;

  constructor(base: number) {
    this.#base = base;
  }

  /** The Worker whose concurrency follows the polls waiting (set once it exists). */
  attach(worker: Worker): void {
    this.#worker = worker;
  }

  /** A poll may wait here: true when there was room (call `leave` when its wait ends). */
  enter(): boolean {
    if (this.#waiting >= POLL_ROOM) return false;
    this.#waiting++;
    this.#apply();
    this.#wake();
    return true;
  }

  leave(): void {
    this.#waiting--;
    this.#apply();
  }

  #apply(): void {
    if (this.#worker) this.#worker.concurrency = this.#base + this.#waiting;
  }

  /**
   * BullMQ's main loop re-reads the concurrency only when something it awaits settles (a fetch,
   * a job ending). With every job at work now waiting as a poll, nothing would until the first
   * wait ends: an empty promise added to the loop's queue makes it look again and fetch. This
   * reaches into the Worker (`mainLoopQueue`, BullMQ 6); without it, the next job ending does.
   */
  #wake(): void {
    const loop = (this.#worker as unknown as { mainLoopQueue?: { add(p: Promise<unknown>): void } } | undefined)
      ?.mainLoopQueue;
    loop?.add(Promise.resolve(undefined));
  }
}

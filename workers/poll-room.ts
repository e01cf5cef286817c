// How many jobs an account's Worker runs at once, and room for polls that wait for their time in
// the worker (workers/processor.ts #pollAt) without taking the place of a job at work.
//
// Jobs at work: VQ_CONCURRENCY at least, more when the account's rate needs them. A job holds its
// place while it waits for its slot in the process's line, while its request is out and while its
// Redis steps run, so a Worker keeps the key busy only with about rate × that time jobs at work
// (Little's law): with 8, a 100/s key whose upstream answers in 100-150 ms got 33-69 requests a
// second, a 400/s key beside a local upstream 260 (issue 21's bench). `need` follows the rate in
// force and the answer time measured.
//
// Polls: a waiting poll keeps its BullMQ job active, and BullMQ counts every active job against
// the Worker's concurrency; so while polls wait here the Worker's concurrency is the jobs at work
// plus the polls waiting, never more. A static VQ_CONCURRENCY + 256 let BullMQ fetch a whole
// batch's creates ahead of the scheduler (unfair shares between batches, creates taken past a
// batch's cap); this keeps the jobs at work to what the pace can use.
import type { Worker } from 'bullmq';
import { wakeMainLoop } from '../src/engine/bullmq/worker.js';

/**
 * Polls waiting in one account's Worker at most: each is a timer and a job lock (BullMQ renews
 * the locks of all its active jobs in one call). Beyond it a poll goes through BullMQ's delayed set,
 * at about 25 commands and three round trips more. A poll keeps its place until its slot is taken,
 * and a closing batch's creates take the slots first (queue/feeder.ts closingUntil), so a batch's
 * polls wait here together while its last creates go out: at 256, a cold 300-plate batch at 30/s
 * sent 40-43 plates' polls through the delayed set in two of four runs (the room full at 256).
 */
export const POLL_ROOM = 1_024;

/** Jobs at work in one account's Worker at most, whatever the rate (VQ_CONCURRENCY's own bound). */
export const MOST_AT_WORK = 1_000;

/**
 * Places lent beyond the concurrency at most (PollRoom.lend): one a producer's wake, taken back
 * by the next fetch; a few wakes close together (interactive batches) are a few places.
 */
export const MOST_LENT = 4;

/**
 * Besides twice the answer time, what a job holds its place for each request: its Redis steps
 * (admission, fence, settle, BullMQ's fetch and finish) and its wait in the process's line for a
 * slot. 150 ms: a 400/s key beside a local upstream used 0.91 of its limit with 24 jobs at work
 * and 0.99 with 64 (this gives 62).
 */
const STEPS_MS = 150;

/** The jobs at work that keep a key of `perSecond` busy when its upstream answers in `answerMs`. */
export function jobsNeeded(perSecond: number, answerMs: number): number {
  return Math.min(MOST_AT_WORK, Math.ceil((perSecond * (2 * answerMs + STEPS_MS)) / 1_000));
}

/** The upstream's answer time, smoothed over the last twenty or so answers (one slow answer moves it a tenth). */
export class AnswerTime {
  #ms: number | undefined;

  add(ms: number): number {
    this.#ms = this.#ms === undefined ? ms : this.#ms + (ms - this.#ms) / 10;
    return this.#ms;
  }
}

export class PollRoom {
  /** VQ_CONCURRENCY: the jobs at work whatever the rate. */
  readonly #least: number;
  #needed = 0;
  #waiting = 0;
  /** Places lent for new work (lend), until fetches take them back (fetched). */
  #lent = 0;
  #worker: Worker | undefined;

  constructor(least: number) {
    this.#least = least;
  }

  /** Jobs at work now (polls waiting not counted). */
  get atWork(): number {
    return Math.max(this.#least, this.#needed);
  }

  /** The account's rate in force and its upstream's answer time ask for this many jobs at work. */
  need(jobs: number): void {
    const before = this.atWork;
    this.#needed = jobs;
    if (this.atWork === before) return;
    this.#apply();
    // More room: BullMQ fetches at once, not when a job of the smaller number ends.
    if (this.atWork > before) this.#wake();
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

  /**
   * A producer put new work on the account's queue (an ingest's wake: workers/doorbell.ts
   * ringNew): one place beyond the concurrency, so the Worker fetches its most urgent job now
   * even when every place is taken. A Worker fetches only when a place frees, and a poll's place
   * frees none (it goes from the room to work and back, or ends with its job): while polls took
   * every slot, creates waited and so did every fetch. An interactive plate then waited for a
   * place as long as the polls came: under a 3,000-plate batch at 20/s with answers of 2-6 s (71
   * polls waiting at one ingest), 172-4,887 ms from its ingest to its create over two runs of six
   * plates, over half a second in 6 of the 12 (119-124 ms with the lend, six of six), where a
   * person waits on a screen.
   */
  lend(): void {
    if (this.#lent >= MOST_LENT) return;
    this.#lent++;
    this.#apply();
    this.#wake();
  }

  /** A job was fetched: a place lent for it (lend), if any, is taken back. */
  fetched(): void {
    if (this.#lent === 0) return;
    this.#lent--;
    this.#apply();
  }

  #apply(): void {
    if (this.#worker) this.#worker.concurrency = this.atWork + this.#waiting + this.#lent;
  }

  /**
   * BullMQ's main loop re-reads the concurrency only when something it awaits settles (a fetch,
   * a job ending). With every job at work now waiting as a poll, nothing would until the first
   * wait ends: the loop is woken to look again and fetch (src/engine/bullmq/worker.ts, a reach
   * into the Worker; without it, the next job ending does).
   */
  #wake(): void {
    if (this.#worker) wakeMainLoop(this.#worker);
  }
}

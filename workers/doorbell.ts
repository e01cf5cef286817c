// Wakes an account's BullMQ Worker in this process when work may be waiting for it, in place of
// the blocking connection BullMQ gives every Worker (BZPOPMIN on the queue's marker). A Worker
// per busy account each holding a connection made a process's connections grow with the busy
// accounts (issue 21: 1,000 busy accounts, 4 processes, 4,010 Redis clients, and the first
// requests 9-14 s late while 4,000 connections opened). BullMQ 6 lets a Worker take its backend
// from a factory (`backendFactory`, documented for other datastores): here it is BullMQ's own
// Redis backend on the process's shared connection with no blocking connection, whose wait for
// work waits on this doorbell instead of on Redis (src/engine/bullmq/worker.ts builds it). So the
// connections of a process stay the same whatever the number of accounts, on one Redis and on a
// Cluster alike.
//
// What rings it, for the Worker to fetch (moveToActive) at once (a producer's wake also lends a
// Worker at its concurrency one place beyond it: ringNew):
// - the process's feed pass (workers/worker.ts), every time it finds the account's queue holding
//   jobs waiting (its own feed's, another process's, a producer's, a rerun's, stalled jobs put
//   back), at most every feed period (200 ms; a resting account, up to its rest);
// - a wake published by a producer or a feeder of any process (queue/wake.ts), when it added jobs:
//   an interactive plate is fetched at once, not at the next feed pass;
// - a job this process delays (a poll's wait): the Worker looks when it comes due;
// - jobs its Worker found stalled and put back in wait (BullMQ's `stalled` event);
// - the wait's own bound, BullMQ's block timeout (its next delayed job, else `drainDelay`), as before.
// A ring while the Worker is not waiting (it is fetching or at its concurrency) is kept: its next
// wait returns at once, so no wake is lost between a fetch that found nothing and the next wait.

import type { BackendFactory, RedisQueueBackend, Worker } from 'bullmq';
import { type Clock, clock } from '../src/clock.js';
import { quietBackend } from '../src/engine/bullmq/worker.js';

/** One Worker's bell: its wait, if it waits now, and what rang while it did not. */
interface Bell {
  open?: (() => void) | undefined;
  /** One place beyond the Worker's concurrency (workers/poll-room.ts lend), for ringNew. */
  lend?: (() => void) | undefined;
  timer?: NodeJS.Timeout | undefined;
  /** Epoch ms the current wait ends at by itself. */
  until: number;
  /** Rung while not waiting: the next wait returns at once. */
  rung: boolean;
  /** Epoch ms of the earliest job this process delayed and the Worker has not looked for since. */
  dueAt?: number | undefined;
}

export class Doorbell {
  readonly #bells = new Map<string, Set<Bell>>();
  readonly #clock: Pick<Clock, 'now' | 'setTimeout' | 'clearTimeout'>;

  /** `time`: the worker's clock (services.ts), whose timers open the bells rung for later. */
  constructor(time: Pick<Clock, 'now' | 'setTimeout' | 'clearTimeout'> = clock) {
    this.#clock = time;
  }

  #now(): number {
    return this.#clock.now();
  }

  /** Work may be waiting for the account: its Worker (if this process runs one) fetches now. */
  ring(accountId: string): void {
    for (const bell of this.#bells.get(accountId) ?? []) {
      if (bell.open) this.#open(bell);
      else bell.rung = true;
    }
  }

  /**
   * A producer put new work on the account's queue (its wake): as ring, and a Worker at its
   * concurrency (not waiting) is lent one place beyond it, so it fetches the queue's most urgent
   * job (an interactive plate) now, not when a place frees (PollRoom.lend says why). Only a
   * producer's wake lends: a feed pass rings every 200 ms while jobs wait, and lending then would
   * fetch creates ahead of the pace.
   */
  ringNew(accountId: string): void {
    for (const bell of this.#bells.get(accountId) ?? []) {
      if (bell.open) this.#open(bell);
      else {
        bell.rung = true;
        bell.lend?.();
      }
    }
  }

  /** A job of the account comes due at `at` (epoch ms): its Worker fetches then. */
  ringAt(accountId: string, at: number): void {
    for (const bell of this.#bells.get(accountId) ?? []) {
      if (bell.dueAt !== undefined && bell.dueAt <= at) continue;
      bell.dueAt = at;
      if (bell.open) this.#arm(bell);
    }
  }

  /**
   * BullMQ's Redis backend for the account's Worker: the connection given as `connection` (shared,
   * not duplicated), no blocking connection, and waits on this doorbell (src/engine/bullmq/worker.ts
   * builds it). The bell lives as long as the backend: closing it (the Worker's close) ends a wait
   * and forgets the bell. `lend`: lends the Worker one place beyond its concurrency (ringNew).
   */
  backendFor(accountId: string, lend?: () => void): BackendFactory<RedisQueueBackend> {
    return quietBackend(() => {
      const bell: Bell = { until: 0, rung: false, lend };
      let bells = this.#bells.get(accountId);
      if (!bells) this.#bells.set(accountId, (bells = new Set()));
      bells.add(bell);
      return {
        wait: (ms) => this.#wait(bell, ms),
        interrupt: () => {
          if (bell.open) this.#open(bell);
        },
        delayed: (at) => this.ringAt(accountId, at),
        closed: () => {
          if (bell.open) this.#open(bell);
          bells.delete(bell);
          if (bells.size === 0 && this.#bells.get(accountId) === bells) this.#bells.delete(accountId);
        },
      };
    });
  }

  /** Jobs the Worker found stalled are put back in wait: it fetches them now, not at the next feed pass. */
  listen(worker: Pick<Worker, 'on'>, accountId: string): void {
    worker.on('stalled', () => this.ring(accountId));
  }

  #wait(bell: Bell, ms: number): Promise<void> {
    if (bell.rung) {
      bell.rung = false;
      return Promise.resolve();
    }
    return new Promise<void>((resolve) => {
      bell.open = resolve;
      bell.until = this.#now() + Math.max(0, ms);
      this.#arm(bell);
    });
  }

  #arm(bell: Bell): void {
    this.#clock.clearTimeout(bell.timer);
    const at = Math.min(bell.until, bell.dueAt ?? Number.POSITIVE_INFINITY);
    bell.timer = this.#clock.setTimeout(() => this.#open(bell), Math.max(0, at - this.#now()));
  }

  #open(bell: Bell): void {
    this.#clock.clearTimeout(bell.timer);
    bell.timer = undefined;
    // The fetch that follows promotes every delayed job due by now.
    if (bell.dueAt !== undefined && bell.dueAt <= this.#now()) bell.dueAt = undefined;
    const open = bell.open;
    bell.open = undefined;
    open?.();
  }
}

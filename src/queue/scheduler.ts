// Which plate an account creates next. Plates waiting to be created are not BullMQ jobs: each
// batch keeps them in a compact list (about 10 bytes a plate instead of a job's kilobyte), and
// the feeder (queue/feeder.ts) turns a few at a time into jobs, as the account's pace needs them.
// The choice is fair: classes in order (interactive, normal, bulk), and within a class stride
// scheduling by weight, a newcomer sharing from the moment it arrives; a batch with a deadline goes
// before the weights while its slack runs out (sched-take, docs/plans.md). It also keeps the set of
// active accounts (plates waiting or jobs on their queue): worker processes feed only those and run
// a BullMQ Worker only for those, so an idle account costs nothing. This module alone reads and
// writes the class sets, the weights, the deadlines, the pending lists, the staged set and the active set.
import type { ChainableCommander } from 'ioredis';
import { clock } from '../clock.js';
import { RATE_LIMIT_SWITCH } from '../engine/bullmq/keys.js';
import type { RedisClient } from '../redis/connection.js';
import type { BatchRef, VqbKeys } from '../redis/keys.js';
import { PRIORITY_CLASSES, type PriorityClass } from '../redis/keys.js';
import { type Scripted, withScripts } from '../redis/scripts.js';

export interface Picked {
  cls: PriorityClass;
  batchId: string;
  plate: string;
}

export interface BatchShare {
  batchId: string;
  cls: PriorityClass;
  weight: number;
  /** Share of the account's creates the batch gets now (0 while a higher class has creates waiting). */
  share: number;
}

/**
 * An account's BullMQ queue keys the feed reads to know how much is queued and whether anything is
 * left (src/engine/bullmq/keys.ts names them).
 */
export interface QueueKeys {
  wait: string;
  prioritized: string;
  delayed: string;
  active: string;
  paused: string;
  /** BullMQ's rate-limit switch of the queue (a PTTL is read). */
  limiter: string;
}

/** The account's in-flight cap as the feed reads it (queue/inflight.ts owns the set). */
export interface InFlightCap {
  key: string;
  cap: number;
  /** Interactive plates too within the cap's room (first contact: one create at a time, whatever it is). */
  strict?: boolean;
}

/** Where the feed reads until when the account's creates are held at a spending cap (queue/line.ts owns it). */
export interface CapHold {
  key: string;
  field: string;
}

/**
 * What a feed needs to weigh deadlines: ms a plate takes at the rate in force, ms kept in reserve
 * before a deadline.
 */
export interface DeadlinePace {
  msPerPlate: number;
  reserveMs: number;
}

export interface Feed {
  picked: Picked[];
  /**
   * The account had nothing left (no plate waiting, staged or queued) and is out of the active set
   * (by this feed or another process's).
   */
  idle: boolean;
  /** When idle: the generation of the account's active flag that was cleared (sched-retire). */
  generation: number;
  /** When not idle: the jobs the account's queue holds waiting (wait + prioritized), this feed's included. */
  waiting: number;
  /** When jobs wait: the ms left of the queue's rate-limit switch (no Worker takes them before), else 0. */
  limitedMs: number;
  /** Each normal batch this feed picked from: its plates still waiting to be fed (queue/feeder.ts closing creates). */
  left: Map<string, number>;
  /** The normal batches with plates waiting that this feed did not pick from. */
  othersWaiting: number;
}

const SCRIPTS = ['sched-enlist', 'sched-pick', 'sched-feed', 'sched-retire'] as const;

/** How a pooled batch is listed with a key of its pool other than its home: `<id>@<home>` (batch ids hold no `@`). */
export function lentId(batchId: string, home: string): string {
  return `${batchId}@${home}`;
}

/** The batch and its home a lent listing names, or undefined for an account's own batch. */
export function lentOf(listed: string): { batchId: string; home: string } | undefined {
  const at = listed.lastIndexOf('@');
  return at > 0 ? { batchId: listed.slice(0, at), home: listed.slice(at + 1) } : undefined;
}

function member(p: Picked): string {
  return `${PRIORITY_CLASSES.indexOf(p.cls) + 1}:${p.batchId}.${p.plate}`;
}

function parseMember(m: string): Picked | undefined {
  const match = /^(\d):(.*)\.([A-Z0-9]+)$/.exec(m);
  const cls = match ? PRIORITY_CLASSES[Number(match[1]) - 1] : undefined;
  return match && cls ? { cls, batchId: match[2]!, plate: match[3]! } : undefined;
}

/** The scripts' flat replies (class index, batch id, plate, …) from `start` to `end`. */
function unflatten(flat: readonly (number | string)[], start: number, end = flat.length): Picked[] {
  const picked: Picked[] = [];
  for (let i = start; i + 2 < end; i += 3) {
    picked.push({
      cls: PRIORITY_CLASSES[Number(flat[i]) - 1]!,
      batchId: String(flat[i + 1]),
      plate: String(flat[i + 2]),
    });
  }
  return picked;
}

export class Scheduler {
  readonly #redis: Scripted<(typeof SCRIPTS)[number]>;
  readonly #keys: VqbKeys;
  readonly #now: () => number;

  constructor(redis: RedisClient, keys: VqbKeys, now: () => number = clock.now) {
    this.#redis = withScripts(redis, SCRIPTS);
    this.#keys = keys;
    this.#now = now;
  }

  /** Appends plates to the batch's waiting list (ingest calls enlist after it). */
  async push(batch: BatchRef, plates: readonly string[]): Promise<void> {
    if (plates.length > 0) await this.#redis.rpush(this.#keys.pending(batch), ...plates);
  }

  /**
   * `push` and `enlist` as commands of the caller's transaction: ingest stores a chunk's rows,
   * counts and plates in one MULTI, so a full Redis refuses all of them or none (no plate waits
   * whose row and count were never stored). The transaction must come from a connection this
   * scheduler was built on (its scripts are defined there). Call `announce` after it ran.
   */
  pushIn(
    tx: ChainableCommander,
    accountId: string,
    batchId: string,
    cls: PriorityClass,
    weight: number,
    plates: readonly string[],
    deadline?: number,
    lenders: readonly string[] = [],
  ): void {
    if (plates.length === 0) return;
    tx.rpush(this.#keys.pending({ id: batchId, account: accountId }), ...plates);
    if (deadline !== undefined) tx.zadd(this.#keys.schedDeadlines(accountId), deadline, batchId);
    const enlist = (...args: (string | number)[]) =>
      (tx as unknown as Record<string, (...a: (string | number)[]) => unknown>)['vqbSchedEnlist']!(...args);
    enlist(...this.#enlistArgs(accountId, batchId, cls, weight));
    // A pooled batch: every other key of its pool takes from the same list as it has room.
    for (const key of lenders) enlist(...this.#enlistArgs(key, lentId(batchId, accountId), cls, weight));
  }

  /**
   * Marks plates of a held key as staged before their jobs are taken off its queue (queue/pool.ts),
   * scored long ago: should the process die before `giveBack`, the next feeder's recovery adds
   * their jobs to the key's queue again (a no-op for a job still there), and none is lost.
   */
  async stageForReturn(accountId: string, picked: readonly Picked[]): Promise<void> {
    if (picked.length > 0)
      await this.#redis.zadd(this.#keys.staged(accountId), ...picked.flatMap((p) => [0, member(p)]));
  }

  /**
   * A pooled batch's plates a held key (`from`) had fed and never created go back to the head of
   * the batch's one list (its home's) in the same step as they leave `from`'s staged set, and the
   * batch is listed again with its home and with the keys `lenders`, each taking them as it has
   * room. One MULTI: a plate is either staged with `from` or waiting in the list, never both.
   */
  async giveBack(from: string, home: string, batchId: string, picked: readonly Picked[], lenders: readonly string[]) {
    if (picked.length === 0) return;
    const cls = picked[0]!.cls;
    const weight = Number((await this.#redis.hget(this.#keys.schedWeights(home), batchId)) ?? 1) || 1;
    const tx = this.#redis
      .multi()
      .lpush(this.#keys.pending({ id: batchId, account: home }), ...picked.map((p) => p.plate).reverse())
      .zrem(this.#keys.staged(from), ...picked.map(member));
    const enlist = (...args: (string | number)[]) =>
      (tx as unknown as Record<string, (...a: (string | number)[]) => unknown>)['vqbSchedEnlist']!(...args);
    enlist(...this.#enlistArgs(home, batchId, cls, weight));
    for (const key of lenders) enlist(...this.#enlistArgs(key, lentId(batchId, home), cls, weight));
    const replies = (await tx.exec()) ?? [];
    for (const [err] of replies) if (err) throw err;
    for (const account of [home, ...lenders]) await this.announce(account);
  }

  /** The batch takes part in its account's scheduling (again); a no-op while it already does. */
  async enlist(
    accountId: string,
    batchId: string,
    cls: PriorityClass,
    weight: number,
    deadline?: number,
  ): Promise<void> {
    if (deadline !== undefined) await this.#redis.zadd(this.#keys.schedDeadlines(accountId), deadline, batchId);
    await this.#redis.vqbSchedEnlist(...this.#enlistArgs(accountId, batchId, cls, weight));
    await this.announce(accountId);
  }

  #enlistArgs(accountId: string, batchId: string, cls: PriorityClass, weight: number): (string | number)[] {
    const keys = [
      this.#keys.schedClass(accountId, cls),
      this.#keys.schedWeights(accountId),
      this.#keys.schedActiveFlag(accountId),
    ];
    return [...keys, batchId, weight];
  }

  /**
   * Lists the account among the active ones at its flag's generation (after an enlist set the
   * flag on the account's slot). GT: a later generation is never lowered, and a feed that found the
   * account idle at an older one (sched-retire) leaves it listed. Should this process die between
   * the enlist and here, the account waits for the next process start (`activate`).
   */
  async announce(accountId: string): Promise<void> {
    const gen = Number((await this.#redis.hget(this.#keys.schedActiveFlag(accountId), 'gen')) ?? 0);
    await this.#redis.zadd(this.#keys.schedActive, 'GT', gen, accountId);
  }

  /**
   * Marks accounts active: a job was put on an account's queue outside the scheduler (a rerun's
   * poll), or a process starting looks once at every account it serves (work left from before the
   * active set existed, or queued while no process ran). Each gets a new generation; one with
   * nothing to do leaves again at its first feed. (Worker processes hear of an account that joins
   * from a wake: queue/feeder.ts activateAndWake.)
   */
  async activate(accountIds: readonly string[]): Promise<void> {
    if (accountIds.length === 0) return;
    const gens = await Promise.all(
      accountIds.map(async (id) => {
        const flag = this.#keys.schedActiveFlag(id);
        const replies = (await this.#redis.multi().hset(flag, 'on', '1').hincrby(flag, 'gen', 1).exec()) ?? [];
        const [err, gen] = replies[1] ?? [null, 0];
        if (err) throw err;
        return Number(gen);
      }),
    );
    await this.#redis.zadd(this.#keys.schedActive, 'GT', ...accountIds.flatMap((id, i) => [gens[i]!, id]));
  }

  /** The accounts with work: the only ones a worker process feeds and runs a Worker for. */
  async activeAccounts(): Promise<string[]> {
    return this.#redis.zrange(this.#keys.schedActive, 0, '-1');
  }

  /**
   * One feed of the account's queue in one round trip (sched-feed): up to `interactiveMax`
   * interactive plates, then creates of any class until `target` jobs wait on the queue (and no
   * more than the in-flight cap has room for); staged
   * until `unstage`. With nothing left anywhere, the account leaves the active set (`idle`).
   */
  async feed(
    accountId: string,
    queue: QueueKeys,
    inflight: InFlightCap,
    capHold: CapHold,
    interactiveMax: number,
    target: number,
    now: number,
    pace: DeadlinePace = { msPerPlate: 0, reserveMs: 0 },
    /** A normal batch just submitted (its producer's feed): one of its plates is taken beyond `target` (sched-feed). */
    fresh = '',
  ): Promise<Feed> {
    const keys = [
      ...PRIORITY_CLASSES.map((c) => this.#keys.schedClass(accountId, c)),
      this.#keys.schedWeights(accountId),
      this.#keys.staged(accountId),
      this.#keys.schedActiveFlag(accountId),
      queue.wait,
      queue.prioritized,
      queue.delayed,
      queue.active,
      queue.paused,
      inflight.key,
      capHold.key,
      queue.limiter,
      this.#keys.schedDeadlines(accountId),
    ];
    const flat = (await this.#redis.vqbSchedFeed(
      ...keys,
      interactiveMax,
      target,
      this.#keys.pendingPrefix(accountId),
      now,
      this.#keys.pendingTemplate,
      inflight.cap,
      capHold.field,
      Math.round(pace.msPerPlate),
      Math.round(pace.reserveMs),
      inflight.strict ? 1 : 0,
      RATE_LIMIT_SWITCH.max,
      fresh,
    )) as (number | string)[];
    const idle = Number(flat[0]) === 1;
    const generation = idle ? Number(flat[1]) : 0;
    if (idle) await this.#redis.vqbSchedRetire(this.#keys.schedActive, accountId, generation);
    // The batches' plates left come after the picks: K pairs, K at index 3; then the other
    // normal batches waiting.
    const last = flat.length - 1;
    const end = last - 2 * Number(flat[3]);
    const left = new Map<string, number>();
    for (let i = end; i + 1 < last; i += 2) left.set(String(flat[i]), Number(flat[i + 1]));
    return {
      idle,
      generation,
      waiting: idle ? 0 : Number(flat[1]),
      limitedMs: Number(flat[2]),
      picked: unflatten(flat, 4, end),
      left,
      othersWaiting: Number(flat[last]),
    };
  }

  /** The batch gets no more creates until enlisted again (held at its spending cap). */
  async delist(accountId: string, batchId: string, cls: PriorityClass): Promise<void> {
    await this.#redis.zrem(this.#keys.schedClass(accountId, cls), batchId);
  }

  /**
   * Takes up to `n` plates to create next, staged until `unstage` says their jobs exist; with
   * `interactiveOnly`, only plates of interactive batches.
   */
  async pick(accountId: string, n: number, now: number, interactiveOnly = false): Promise<Picked[]> {
    if (n <= 0) return [];
    const keys = [
      ...PRIORITY_CLASSES.map((c) => this.#keys.schedClass(accountId, c)),
      this.#keys.schedWeights(accountId),
      this.#keys.staged(accountId),
    ];
    const flat = (await this.#redis.vqbSchedPick(
      ...keys,
      n,
      this.#keys.pendingPrefix(accountId),
      now,
      interactiveOnly ? 1 : PRIORITY_CLASSES.length,
      this.#keys.pendingTemplate,
    )) as (number | string)[];
    return unflatten(flat, 0);
  }

  async unstage(accountId: string, picked: readonly Picked[]): Promise<void> {
    if (picked.length > 0) await this.#redis.zrem(this.#keys.staged(accountId), ...picked.map(member));
  }

  /** Plates picked more than `olderThanMs` ago whose jobs may never have been added (a crash in between). */
  async staleStaged(accountId: string, olderThanMs: number, now: number): Promise<Picked[]> {
    const members = await this.#redis.zrangebyscore(
      this.#keys.staged(accountId),
      0,
      now - olderThanMs,
      'LIMIT',
      0,
      1_000,
    );
    return members.map((m: string) => parseMember(m)).filter((p): p is Picked => p !== undefined);
  }

  /** Plates of the batch still waiting to be fed. */
  async waiting(batch: BatchRef): Promise<number> {
    return this.#redis.llen(this.#keys.pending(batch));
  }

  /** Plates of the account waiting to be fed, over all its batches. */
  async pendingTotal(accountId: string): Promise<number> {
    let total = 0;
    for (const cls of PRIORITY_CLASSES) {
      for (const batchId of await this.#redis.zrange(this.#keys.schedClass(accountId, cls), 0, '-1'))
        total += await this.waiting({ id: batchId, account: accountId });
    }
    return total;
  }

  /**
   * The account was given a batch with a deadline: the deadline watch looks at it from now on (set
   * apart from its slot).
   */
  async noteDeadlineAccount(accountId: string): Promise<void> {
    await this.#redis.sadd(this.#keys.schedDeadlineAccounts, accountId);
  }

  /** The accounts ever given a batch with a deadline (few: a set of configured accounts). */
  async deadlineAccounts(): Promise<string[]> {
    return this.#redis.smembers(this.#keys.schedDeadlineAccounts);
  }

  /** The account's batches that carry a deadline, earliest first (finished ones too, until `undeadline`). */
  async deadlines(accountId: string): Promise<{ batchId: string; deadline: number }[]> {
    const flat = await this.#redis.zrange(this.#keys.schedDeadlines(accountId), 0, '-1', 'WITHSCORES');
    const out: { batchId: string; deadline: number }[] = [];
    for (let i = 0; i + 1 < flat.length; i += 2) out.push({ batchId: flat[i]!, deadline: Number(flat[i + 1]) });
    return out;
  }

  /**
   * What waits to be fed ahead of a batch due at `deadline` on its account: the plates of every
   * interactive batch, and each batch due earlier with its plates (`except`: the batch itself).
   * Which of those earlier ones take its time is the caller's rule (plans/projection.ts).
   */
  async aheadOf(
    accountId: string,
    deadline: number,
    except?: string,
  ): Promise<{ interactive: number; earlier: { batchId: string; deadline: number; waiting: number }[] }> {
    let interactive = 0;
    for (const batchId of await this.#redis.zrange(this.#keys.schedClass(accountId, 'interactive'), 0, '-1'))
      if (batchId !== except) interactive += await this.waiting({ id: batchId, account: accountId });
    const flat = await this.#redis.zrangebyscore(
      this.#keys.schedDeadlines(accountId),
      '-inf',
      `(${deadline}`,
      'WITHSCORES',
    );
    const earlier: { batchId: string; deadline: number; waiting: number }[] = [];
    for (let i = 0; i + 1 < flat.length; i += 2) {
      const batchId = flat[i]!;
      if (batchId === except) continue;
      const waiting = await this.waiting({ id: batchId, account: accountId });
      if (waiting > 0) earlier.push({ batchId, deadline: Number(flat[i + 1]), waiting });
    }
    return { interactive, earlier };
  }

  /** The batch no longer weighs on its account's deadlines (it finished). */
  async undeadline(accountId: string, batchId: string): Promise<void> {
    await this.#redis.zrem(this.#keys.schedDeadlines(accountId), batchId);
  }

  /** Every batch of the account with creates waiting, with its weight and current share. */
  async shares(accountId: string): Promise<BatchShare[]> {
    const out: BatchShare[] = [];
    let served = false;
    for (const cls of PRIORITY_CLASSES) {
      const ids = await this.#redis.zrange(this.#keys.schedClass(accountId, cls), 0, '-1');
      if (ids.length === 0) continue;
      const weights = (await this.#redis.hmget(this.#keys.schedWeights(accountId), ...ids)).map(
        (w: string | null) => Number(w ?? 1) || 1,
      );
      const total = weights.reduce((a: number, b: number) => a + b, 0);
      ids.forEach((batchId: string, i: number) => {
        out.push({ batchId, cls, weight: weights[i]!, share: served ? 0 : weights[i]! / total });
      });
      served = true;
    }
    return out;
  }

  /**
   * Takes every plate of the batch still waiting to be fed, at once, and takes the batch out of
   * its account's scheduling: these plates will never become jobs (a cancel). Plates already picked
   * are not among them; they become jobs and run.
   */
  async drop(accountId: string, batchId: string): Promise<string[]> {
    const pending = this.#keys.pending({ id: batchId, account: accountId });
    const multi = this.#redis
      .multi()
      .lrange(pending, 0, -1)
      .del(pending)
      .zrem(this.#keys.schedDeadlines(accountId), batchId);
    for (const cls of PRIORITY_CLASSES) multi.zrem(this.#keys.schedClass(accountId, cls), batchId);
    const replies = (await multi.exec()) ?? [];
    const [err, plates] = replies[0] ?? [null, []];
    if (err) throw err;
    return plates as string[];
  }

  /** Removes every trace of the batch from the account's scheduling (retention). */
  async forget(accountId: string, batchId: string): Promise<void> {
    const multi = this.#redis
      .multi()
      .del(this.#keys.pending({ id: batchId, account: accountId }))
      .hdel(this.#keys.schedWeights(accountId), batchId)
      .zrem(this.#keys.schedDeadlines(accountId), batchId);
    for (const cls of PRIORITY_CLASSES) multi.zrem(this.#keys.schedClass(accountId, cls), batchId);
    await multi.exec();
    const staged = (await this.#redis.zrange(this.#keys.staged(accountId), 0, '-1')).filter(
      (m: string) => parseMember(m)?.batchId === batchId,
    );
    if (staged.length > 0) await this.#redis.zrem(this.#keys.staged(accountId), ...staged);
  }
}

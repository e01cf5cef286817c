// Pools of keys (docs/plans.md): accounts of one product and owner declared `"pool": "NAME"` serve
// a pooled batch together. The batch lives in one account (its home); the other keys list it as
// `<id>@<home>` and take its plates from the one list as each has room (queue/scheduler.ts), so
// every key runs at its own learned rate and the pool's is their sum. This module decides what a
// key that holds (a paused key, a quota, a long 429 wait, a spending cap) does with its share: it
// takes no more plates, and the pooled plates it had fed and never created go back to the list
// for the others, within a feed period. A plate that was created stays with its key: its query id
// belongs to the key that created it, so its polls wait for that key.
import type { Logger } from 'pino';
import { clock } from '../clock.js';
import type { AccountRecord, Accounts } from './accounts.js';
import type { BatchStore } from './batch/store.js';
import type { LineRate } from './line.js';
import { lentId, type Picked, type Scheduler } from './scheduler.js';
import type { PlateJobData } from './types.js';

/** A hold longer than this moves a key's share to the other keys (a short 429 wait is the pace's business). */
export const POOL_HOLD_MS = 2_000;

/** How often a process looks at a held key's queue for plates to give back, at most. */
const GIVE_BACK_EVERY_MS = 250;

/** Jobs looked at in one pass (a key holds about half a second of its rate on its queue: few). */
const GIVE_BACK_AT_ONCE = 1_000;

/**
 * Keys whose announced quotas agree this many samples in a row (same reset, remainders within
 * QUOTA_NEAR of each other, taken within QUOTA_SAMPLE_MS) are said to be one quota, for
 * QUOTA_SHARED_MS after the last agreement.
 */
const QUOTA_STREAK = 5;
const QUOTA_SAMPLE_MS = 1_000;
const QUOTA_SHARED_MS = 10 * 60_000;
/**
 * ...and both keys drew QUOTA_LIMITED_COUNT 429s this recently (as this process heard them). Each
 * key is paced under its own learned limit, so an independent key draws next to none; two keys that
 * are one quota draw them while their paces sum past it (half their requests, at first). Remainders
 * alone agree by chance: two independent keys of one limit, both used to the full, both announce
 * next to nothing left (the test's false one). One 429 is not enough: requests sent on their slots
 * can reach the upstream bunched (a loaded machine, a slow network), and an independent key then
 * draws a stray one (a CI run's false "one quota").
 */
const QUOTA_LIMITED_MS = 60_000;
const QUOTA_LIMITED_COUNT = 3;
/**
 * Or, whatever their remainders: both announce the same limit and one of them drew this many 429s
 * within QUOTA_FIGHT_MS. Two keys that are one quota, each paced at the whole of it, do not share
 * the refusals: whichever sends first as the window moves takes it, and the other has most of its
 * requests refused (236 and 8, 276 and 4 429s in 30 s; once 20 a second for 13 s and none on the
 * other key), while their remainders, sampled a second apart in a per-second window, agree by
 * chance only: "both drew three and five samples agreed" came after 20 s, or never, and the pair
 * fought to the end of the batch (key-pools.test.ts). A key paced under its own limit draws a
 * stray one, not ten in ten seconds.
 */
const QUOTA_FIGHT_MS = 10_000;
const QUOTA_FIGHT_COUNT = 10;

/** Remainders this close (or 5 % of the limit) count as the same (the two samples are up to a second apart). */
function quotaNear(limit: number | undefined): number {
  return Math.max(2, Math.ceil((limit ?? 0) * 0.05));
}

/** What a key's answer announced of its quota (X-RateLimit-*), as queue/pool.ts compares it. */
export interface QuotaSample {
  limit?: number;
  remaining?: number;
  resetAt?: number;
  observedAt: number;
}

export interface PoolKeyState {
  account: string;
  /** Its rate in force (learned or configured), requests a second. */
  perSecond: number;
  /** Its share of the pool's rate now (0 while it holds). */
  share: number;
  /** `serving`, or why it holds (a pause's code, `quota`, `rate_limit`, `budget`). */
  state: string;
}

export interface PoolState {
  pool: string;
  /** The sum of the serving keys' rates, requests a second. */
  perSecond: number;
  keys: PoolKeyState[];
  /** Groups of keys whose limits look like one quota (their 429s and remainders move together). */
  sharedQuota: string[][];
}

export class KeyPools {
  readonly #accounts: Pick<Accounts, 'for' | 'all'>;
  readonly #scheduler: Scheduler;
  readonly #batches: Pick<BatchStore, 'read'>;
  readonly #now: () => number;
  readonly #lastLook = new Map<string, number>();
  readonly #samples = new Map<string, QuotaSample>();
  readonly #streaks = new Map<string, number>();
  /** Each pooled key's last 429s (epoch ms, as many as QUOTA_FIGHT_COUNT), oldest first. */
  readonly #limitedAt = new Map<string, number[]>();
  /** Pairs this process said are one quota (said once in its log). */
  readonly #said = new Set<string>();
  #log: Logger | undefined;

  constructor(
    accounts: Pick<Accounts, 'for' | 'all'>,
    scheduler: Scheduler,
    batches: Pick<BatchStore, 'read'>,
    now: () => number = clock.now,
  ) {
    this.#accounts = accounts;
    this.#scheduler = scheduler;
    this.#batches = batches;
    this.#now = now;
  }

  /** Where a process says what a pool did (a key's share moved): its log. */
  logTo(log: Logger): void {
    this.#log = log;
  }

  /** The keys of pool `name`, in the configured order. */
  members(name: string): AccountRecord[] {
    return this.#accounts.all().filter((r) => r.account.pool === name);
  }

  /** Every declared pool's name. */
  names(): string[] {
    return [...new Set(this.#accounts.all().flatMap((r) => (r.account.pool ? [r.account.pool] : [])))];
  }

  /**
   * Whether a key of a pool takes plates now (an account in no pool always does). A key that holds
   * takes none, and gives back the pooled plates it fed and never created (looked at every
   * GIVE_BACK_EVERY_MS at most by a process).
   */
  async serving(accountId: string): Promise<boolean> {
    const record = this.#accounts.for(accountId);
    const pool = record.account.pool;
    if (pool === undefined) return true;
    const why = await record.line.holding(POOL_HOLD_MS);
    if (why === undefined) return true;
    const now = this.#now();
    if (now - (this.#lastLook.get(accountId) ?? 0) >= GIVE_BACK_EVERY_MS) {
      this.#lastLook.set(accountId, now);
      const moved = await this.giveBack(record, pool);
      if (moved > 0)
        this.#log?.info(
          { account: accountId, pool, reason: why, plates: moved },
          `key ${accountId} of pool ${pool} holds (${why}): ${moved} plates it had not created go to the other keys`,
        );
    }
    return false;
  }

  /**
   * Takes the pooled plates `record`'s queue holds and never created (step `create`: no request
   * left for them) off it and puts them back in their batch's list for the pool's other keys.
   * Each plate is staged with the key first and leaves the staged set in the step that lists it
   * again (Scheduler.giveBack), so a crash anywhere loses none and none is fed twice. A job a
   * worker holds at that moment (active) stays: it goes back to the queue and a later pass moves it.
   */
  async giveBack(record: AccountRecord, pool: string): Promise<number> {
    const jobs = await record.queue.getJobs(['wait', 'prioritized', 'delayed'], 0, GIVE_BACK_AT_ONCE - 1);
    const byBatch = new Map<string, { home: string; batchId: string; picked: Picked[] }>();
    for (const job of jobs) {
      if (!job?.data || !this.#unsent(job.data)) continue;
      const home = job.data.account;
      if (home === record.id && !(await this.#pooled(home, job.data.batchId))) continue;
      const listed = home === record.id ? job.data.batchId : lentId(job.data.batchId, home);
      const picked: Picked = { cls: job.data.cls, batchId: listed, plate: job.data.plate };
      await this.#scheduler.stageForReturn(record.id, [picked]);
      try {
        await job.remove();
      } catch {
        // A worker took it meanwhile: it stays with this key (and goes back to its queue).
        await this.#scheduler.unstage(record.id, [picked]);
        continue;
      }
      const key = `${home}/${job.data.batchId}`;
      const entry = byBatch.get(key) ?? { home, batchId: job.data.batchId, picked: [] };
      entry.picked.push(picked);
      byBatch.set(key, entry);
    }
    let moved = 0;
    const others = this.members(pool)
      .map((r) => r.id)
      .filter((id) => id !== record.id);
    for (const { home, batchId, picked } of byBatch.values()) {
      // Listed again with every other key; with the home too unless the home is the key that holds.
      const lenders = others.filter((id) => id !== home);
      await this.#scheduler.giveBack(record.id, home, batchId, picked, lenders);
      moved += picked.length;
    }
    return moved;
  }

  /**
   * A job no create was made for: stored step `create` (the fence's table, queue/job-fence.ts: the
   * `creating` mark is written before any send, and a create whose answer proved it was not made,
   * such as a 401 for an expired key, is put back at `create`). `creating`, `poll` and `unread`
   * stay with their key: a query may exist, and its id is that key's.
   */
  #unsent(data: PlateJobData): boolean {
    return data.step === 'create';
  }

  readonly #pooledBatches = new Map<string, boolean>();

  /** The pool's keys grouped by the quotas they look to share (groups of two or more). */
  async #sharedGroups(pool: string): Promise<string[][]> {
    const group = new Map<string, string>();
    const find = (id: string): string => {
      const up = group.get(id) ?? id;
      return up === id ? id : find(up);
    };
    for (const r of this.members(pool))
      for (const other of await r.line.sharedQuota()) group.set(find(other), find(r.id));
    const groups = new Map<string, string[]>();
    for (const r of this.members(pool)) groups.set(find(r.id), [...(groups.get(find(r.id)) ?? []), r.id]);
    return [...groups.values()].filter((g) => g.length > 1);
  }

  /** Whether the home's own batch is a pooled one (read once a process). */
  async #pooled(home: string, batchId: string): Promise<boolean> {
    const key = `${home}/${batchId}`;
    let pooled = this.#pooledBatches.get(key);
    if (pooled === undefined) {
      pooled = (await this.#batches.read({ id: batchId, account: home }).catch(() => undefined))?.pool !== undefined;
      if (this.#pooledBatches.size > 10_000) this.#pooledBatches.clear();
      this.#pooledBatches.set(key, pooled);
    }
    return pooled;
  }

  /**
   * A key of a pool announced its quota (an answer's X-RateLimit-* headers, workers/flow.ts). Two
   * keys are one quota when, sampled within a second of each other, they announce the same limit
   * and reset and remainders within a few requests, QUOTA_STREAK samples in a row, and both drew
   * 429s within QUOTA_LIMITED_MS or one of them many (QUOTA_FIGHT_COUNT): two independent keys of
   * the pool spend at their own rates, so their remainders drift apart, or (both used to the full)
   * agree but draw no 429s. Said once in the log (per process) and kept on both keys' paces, which
   * split the limit they announce between them from then on (lua/pace-learn), for `vqb status`
   * and /healthz.
   */
  async observe(accountId: string, quota: QuotaSample | undefined): Promise<void> {
    const pool = this.#accounts.for(accountId).account.pool;
    if (pool === undefined || quota?.remaining === undefined || quota.resetAt === undefined) return;
    const last = this.#samples.get(accountId);
    if (last !== undefined && quota.observedAt - last.observedAt < QUOTA_SAMPLE_MS / 2) return;
    this.#samples.set(accountId, quota);
    for (const other of this.members(pool)) {
      if (other.id === accountId) continue;
      const theirs = this.#samples.get(other.id);
      if (theirs?.remaining === undefined || theirs.resetAt === undefined) continue;
      const pair = [accountId, other.id].sort().join(' ');
      // One of them refused again and again under the limit both announce: a key refused at every
      // request answers nothing else, so its last sample may be old (its limit is what counts).
      const fight =
        quota.limit !== undefined &&
        theirs.limit === quota.limit &&
        (this.#fighting(accountId) || this.#fighting(other.id));
      if (!fight) {
        if (Math.abs(theirs.observedAt - quota.observedAt) > QUOTA_SAMPLE_MS) continue;
        const agree =
          theirs.limit === quota.limit &&
          Math.abs(theirs.resetAt - quota.resetAt) <= 1_000 &&
          Math.abs(theirs.remaining - quota.remaining) <= quotaNear(quota.limit);
        const streak = agree ? (this.#streaks.get(pair) ?? 0) + 1 : 0;
        this.#streaks.set(pair, streak);
        if (streak < QUOTA_STREAK || !this.#limitedLately(accountId) || !this.#limitedLately(other.id)) continue;
      }
      const until = quota.observedAt + QUOTA_SHARED_MS;
      if (!this.#said.has(pair))
        this.#log?.warn(
          { pool, accounts: [accountId, other.id], remaining: [quota.remaining, theirs.remaining] },
          `keys ${accountId} and ${other.id} of pool ${pool} look like one quota: ` +
            (fight
              ? `they announce the same limit and one of them has most of its requests refused (429) `
              : `their announced remainders and resets move together and both draw 429s `) +
            `(the pool's rate is not their sum); each is paced at a share of it from now on`,
        );
      this.#said.add(pair);
      await this.#accounts.for(accountId).line.markSharedQuota(other.id, until);
      await other.line.markSharedQuota(accountId, until);
    }
  }

  /** A pooled key answered 429 (workers/flow.ts). */
  limited(accountId: string): void {
    const times = this.#limitedAt.get(accountId) ?? [];
    times.push(this.#now());
    if (times.length > Math.max(QUOTA_LIMITED_COUNT, QUOTA_FIGHT_COUNT)) times.shift();
    this.#limitedAt.set(accountId, times);
  }

  /** The key's last QUOTA_LIMITED_COUNT 429s all came within QUOTA_LIMITED_MS. */
  #limitedLately(accountId: string): boolean {
    return this.#lastWithin(accountId, QUOTA_LIMITED_COUNT, QUOTA_LIMITED_MS);
  }

  /** The key's last QUOTA_FIGHT_COUNT 429s all came within QUOTA_FIGHT_MS. */
  #fighting(accountId: string): boolean {
    return this.#lastWithin(accountId, QUOTA_FIGHT_COUNT, QUOTA_FIGHT_MS);
  }

  #lastWithin(accountId: string, count: number, ms: number): boolean {
    const times = this.#limitedAt.get(accountId) ?? [];
    return times.length >= count && this.#now() - times[times.length - count]! <= ms;
  }

  /** Each pool's rate (the sum of its serving keys'), and each key's rate, share and state. */
  async states(): Promise<PoolState[]> {
    const out: PoolState[] = [];
    for (const pool of this.names()) {
      const keys: PoolKeyState[] = (await keyStates(this.members(pool))).map((k) => ({
        account: k.account,
        perSecond: k.rate.perSecond,
        share: 0,
        state: k.holding ?? 'serving',
      }));
      const perSecond = keys.filter((k) => k.state === 'serving').reduce((sum, k) => sum + k.perSecond, 0);
      for (const k of keys) k.share = k.state === 'serving' && perSecond > 0 ? k.perSecond / perSecond : 0;
      out.push({ pool, perSecond, keys, sharedQuota: await this.#sharedGroups(pool) });
    }
    return out;
  }
}

/** A key of a pool now: its rate in force, and why it holds (undefined while it serves). */
export interface KeyNow {
  account: string;
  rate: LineRate;
  holding: string | undefined;
}

/**
 * What a pool's rate is summed from, read one way for what is shown (KeyPools.states) and for the
 * plans (plans/projection.ts): each key's rate in force, and why it holds (POOL_HOLD_MS).
 */
export async function keyStates(records: readonly AccountRecord[]): Promise<KeyNow[]> {
  return Promise.all(
    records.map(async (r) => {
      const [holding, rate] = await Promise.all([r.line.holding(POOL_HOLD_MS), r.line.rate()]);
      return { account: r.id, rate, holding };
    }),
  );
}

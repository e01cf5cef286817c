// The order in which an account's plates are picked for creation (queue/scheduler.ts and its
// scripts, includes/sched-take.lua) on a clock the test owns (issue 45): weights, priority classes,
// deadlines and pooled batches decide which plate goes next, and each feed is handed its `now`, so
// a run of thousands of picks over minutes of virtual time takes a second, and what it checks is
// the rule itself (exact counts), not how a loaded machine happened to schedule workers. The
// engine tests (scheduling, deadlines, key-pools) run the same rule with real workers and assert
// only what load cannot change: every plate created once, no 429, the batches finish.
import { afterEach, describe, expect, it } from 'vitest';
import { queueKeys } from '../../src/engine/bullmq/keys.js';
import { openAccountQueue } from '../../src/queue/account-queues.js';
import { type DeadlinePace, lentId, lentOf, type QueueKeys, Scheduler } from '../../src/queue/scheduler.js';
import type { PriorityClass } from '../../src/redis/keys.js';
import { VqbKeys } from '../../src/redis/keys.js';
import { testConfig } from '../helpers/config.js';
import { type RedisTestContext, redisTestContext } from '../helpers/redis.js';

const contexts: RedisTestContext[] = [];
afterEach(async () => {
  for (const c of contexts.splice(0)) await c.cleanup();
});

const T0 = 1_800_000_000_000;

interface Arrival {
  /** Virtual ms after the start. */
  at: number;
  batch: string;
  plates: number;
  cls?: PriorityClass;
  weight?: number;
  /** Virtual ms after the start. */
  due?: number;
  /** Listed on these accounts too (a pooled batch: its other keys take from its one list). */
  lenders?: string[];
}

interface Pick {
  at: number;
  account: string;
  batch: string;
  plate: string;
}

async function setUp(label: string) {
  const ctx = await redisTestContext(label);
  contexts.push(ctx);
  const config = testConfig(ctx.prefix);
  const keys = new VqbKeys(config);
  const scheduler = new Scheduler(ctx.redis, keys, () => {
    throw new Error('the scheduler read a clock of its own: every call here is handed its now');
  });
  // The BullMQ queue the feed looks at stays empty: each pick stands for a job added and taken at
  // once, so every feed picks what the pace lets through and nothing waits queued.
  const queue = (account: string): QueueKeys => {
    const base = `${keys.accountBase(account)}:empty-queue`;
    return {
      wait: `${base}:wait`,
      prioritized: `${base}:prioritized`,
      delayed: `${base}:delayed`,
      active: `${base}:active`,
      paused: `${base}:paused`,
      limiter: `${base}:limiter`,
    };
  };
  return { ctx, keys, scheduler, queue };
}

/**
 * Serves `accounts` for as long as plates wait: every `msPerPlate` of virtual time each account
 * takes one plate (one feed, handed that time), arrivals are enlisted when their time comes, and
 * each pick is unstaged as a feeder does once its job exists. `deadlines: false` feeds without a
 * deadline pace (the weights alone); `answerMs` is the reserve the feeder keeps before a deadline.
 */
async function serve(
  s: Awaited<ReturnType<typeof setUp>>,
  arrivals: Arrival[],
  options: { msPerPlate: number; answerMs?: number; deadlines?: boolean; accounts?: string[]; limitMs?: number },
): Promise<Pick[]> {
  const accounts = options.accounts ?? ['default'];
  const home = accounts[0]!;
  const pace: DeadlinePace =
    options.deadlines === false
      ? { msPerPlate: 0, reserveMs: 0 }
      : { msPerPlate: options.msPerPlate, reserveMs: (options.answerMs ?? 200) * 1.5 + 2_000 };
  const pending = [...arrivals].sort((a, b) => a.at - b.at);
  const picks: Pick[] = [];
  let plateNo = 0;
  for (let t = 0; t <= (options.limitMs ?? 600_000); t += options.msPerPlate) {
    while (pending.length > 0 && pending[0]!.at <= t) {
      const a = pending.shift()!;
      const plates = Array.from({ length: a.plates }, () => `AAA${String(plateNo++).padStart(4, '0')}`);
      await s.scheduler.push({ id: a.batch, account: home }, plates);
      const due = a.due !== undefined ? T0 + a.due : undefined;
      await s.scheduler.enlist(home, a.batch, a.cls ?? 'normal', a.weight ?? 1, due);
      for (const lender of a.lenders ?? [])
        await s.scheduler.enlist(lender, lentId(a.batch, home), a.cls ?? 'normal', a.weight ?? 1);
    }
    let fed = 0;
    for (const account of accounts) {
      const feed = await s.scheduler.feed(
        account,
        s.queue(account),
        { key: s.keys.inflight(account), cap: 1_000 },
        { key: s.keys.account(account), field: 'capUntil' },
        0,
        1,
        T0 + t,
        pace,
      );
      for (const p of feed.picked) {
        const batch = p.batchId.includes('@') ? p.batchId.slice(0, p.batchId.indexOf('@')) : p.batchId;
        picks.push({ at: t, account, batch, plate: p.plate });
      }
      // The feed's reply says what each normal batch it picked from has left in its list, as an
      // LLEN after it would (the feeder's closing creates weigh it: queue/feeder.ts).
      for (const listed of new Set(feed.picked.filter((p) => p.cls === 'normal').map((p) => p.batchId))) {
        const lent = lentOf(listed);
        const list = lent ? { id: lent.batchId, account: lent.home } : { id: listed, account };
        expect(feed.left.get(listed)).toBe(await s.scheduler.waiting(list));
      }
      await s.scheduler.unstage(account, feed.picked);
      fed += feed.picked.length;
    }
    if (fed === 0 && pending.length === 0) return picks;
  }
  throw new Error(`plates still waited after ${options.limitMs ?? 600_000} virtual ms`);
}

const lastOf = (picks: Pick[], batch: string) => picks.findLast((p) => p.batch === batch)!.at;
const countOf = (picks: Pick[], batch: string) => picks.filter((p) => p.batch === batch).length;

describe('the order of picks on a virtual clock', () => {
  it.each([
    [1, 1],
    [3, 1],
  ])(
    'weights %i:%i: from the second batch’s arrival, every round of picks holds exactly that split',
    async (wa, wb) => {
      const s = await setUp('pick-weights');
      const picks = await serve(
        s,
        [
          { at: 0, batch: 'first', plates: 150, weight: wa },
          // It arrives when the first has had 30 plates: it neither waits behind them nor catches up.
          { at: 30 * 50, batch: 'second', plates: 150, weight: wb },
        ],
        { msPerPlate: 50 },
      );
      expect(picks.slice(0, 30).every((p) => p.batch === 'first')).toBe(true);
      const both = picks.slice(30, 30 + Math.min(120 / wa, 150 / wb) * (wa + wb));
      for (let i = 0; i + wa + wb <= both.length; i += wa + wb) {
        const round = both.slice(i, i + wa + wb);
        expect(countOf(round, 'first')).toBe(wa);
        expect(countOf(round, 'second')).toBe(wb);
      }
      // Every plate picked once.
      expect(new Set(picks.map((p) => p.plate)).size).toBe(300);
      expect(picks).toHaveLength(300);
    },
  );

  it('an interactive batch goes before every plate queued; bulk waits until normal has nothing left', async () => {
    const s = await setUp('pick-classes');
    const picks = await serve(
      s,
      [
        { at: 0, batch: 'fleet', plates: 200 },
        { at: 0, batch: 'night', plates: 50, cls: 'bulk' },
        { at: 1_000, batch: 'screen', plates: 3, cls: 'interactive' },
      ],
      { msPerPlate: 50 },
    );
    const screen = picks.filter((p) => p.batch === 'screen').map((p) => p.at);
    // The look-up for a customer on a screen: its three plates are the three picks after it came.
    expect(screen).toEqual([1_000, 1_050, 1_100]);
    const firstBulk = picks.findIndex((p) => p.batch === 'night');
    expect(firstBulk).toBe(203);
    expect(picks.slice(firstBulk).every((p) => p.batch === 'night')).toBe(true);
  });

  it('two batches with deadlines go before a larger one without, earliest first, where equal weights make the first late', async () => {
    // 20 plates a second; A (80 plates, due 9 s) and B (120, due 18 s) arrive after a filler of
    // 300. Shared three ways by weight, A gets a third: 12 s for its 80 plates, past its 9 s.
    const arrivals: Arrival[] = [
      { at: 0, batch: 'filler', plates: 300 },
      { at: 0, batch: 'a', plates: 80, due: 9_000 },
      { at: 0, batch: 'b', plates: 120, due: 18_000 },
    ];
    const s = await setUp('pick-deadlines');
    const weighed = await serve(s, arrivals, { msPerPlate: 50, answerMs: 200 });
    const s2 = await setUp('pick-weights-only');
    const weightsOnly = await serve(s2, arrivals, { msPerPlate: 50, deadlines: false });
    // Without deadlines weighed, A's last plate is picked after its deadline: the rule is what makes it.
    expect(lastOf(weightsOnly, 'a')).toBeGreaterThan(9_000);
    // Weighed: each batch's last plate is picked with its answer's time and more to spare before it is due.
    expect(lastOf(weighed, 'a') + 300).toBeLessThanOrEqual(9_000);
    expect(lastOf(weighed, 'b') + 300).toBeLessThanOrEqual(18_000);
    expect(lastOf(weighed, 'a')).toBeLessThan(lastOf(weighed, 'b'));
    // The filler was not starved while they had slack: it had picks before B's last, and all 300 in the end.
    expect(weighed.filter((p) => p.batch === 'filler' && p.at < lastOf(weighed, 'b')).length).toBeGreaterThan(0);
    expect(countOf(weighed, 'filler')).toBe(300);
    expect(weighed).toHaveLength(500);
  });

  it('a batch that cannot make its deadline is left to the weights and makes no other late', async () => {
    // C needs 200 plates × 50 ms = 10 s and is due in 3 s (more than one and a half times the time
    // left): served first, it would miss anyway and make D miss too. D (100 plates, due 12 s) can.
    const s = await setUp('pick-hopeless');
    const picks = await serve(
      s,
      [
        { at: 0, batch: 'c', plates: 200, due: 3_000 },
        { at: 0, batch: 'd', plates: 100, due: 12_000 },
        { at: 0, batch: 'e', plates: 200 },
      ],
      { msPerPlate: 50, answerMs: 200 },
    );
    expect(lastOf(picks, 'd') + 300).toBeLessThanOrEqual(12_000);
    // While D was served first, C did not jump the weights: C and E shared what was left evenly.
    const before = picks.filter((p) => p.at <= lastOf(picks, 'd'));
    expect(Math.abs(countOf(before, 'c') - countOf(before, 'e'))).toBeLessThanOrEqual(1);
  });

  it('a pooled batch waits in one list that each key of its pool takes from: every plate picked once', async () => {
    const s = await setUp('pick-pool');
    const picks = await serve(s, [{ at: 0, batch: 'pooled', plates: 301, lenders: ['k2', 'k3'] }], {
      msPerPlate: 50,
      accounts: ['k1', 'k2', 'k3'],
    });
    expect(picks).toHaveLength(301);
    expect(new Set(picks.map((p) => p.plate)).size).toBe(301);
    // The three keys share it as they have room: a third each, the odd plate to the home key.
    expect(picks.filter((p) => p.account === 'k1')).toHaveLength(101);
    expect(picks.filter((p) => p.account === 'k2')).toHaveLength(100);
    expect(picks.filter((p) => p.account === 'k3')).toHaveLength(100);
    expect(lastOf(picks, 'pooled')).toBe(100 * 50);
  });

  it('a feed at a spending cap picks nothing until the cap’s time has passed, on the clock it is handed', async () => {
    const s = await setUp('pick-cap');
    await s.scheduler.push({ id: 'capped', account: 'default' }, ['ABC1D23', 'ABC1D24']);
    await s.scheduler.enlist('default', 'capped', 'normal', 1);
    await s.ctx.redis.hset(s.keys.account('default'), 'capUntil', String(T0 + 60_000));
    const feedAt = (t: number) =>
      s.scheduler.feed(
        'default',
        s.queue('default'),
        { key: s.keys.inflight('default'), cap: 10 },
        { key: s.keys.account('default'), field: 'capUntil' },
        5,
        5,
        T0 + t,
      );
    expect((await feedAt(59_999)).picked).toHaveLength(0);
    expect((await feedAt(60_001)).picked.map((p) => p.plate)).toEqual(['ABC1D23', 'ABC1D24']);
  });

  it("the queue's rate-limit switch is on only at BullMQ's max: the count of jobs taken in the last second is no hold", async () => {
    // BullMQ counts every job a Worker takes in the limiter key for a second; read as the switch,
    // that second deferred every wake of the account's Worker (a 10/s key created 5 a second).
    const s = await setUp('pick-limiter');
    const config = testConfig(s.ctx.prefix);
    const queue = openAccountQueue(config, 'default', s.ctx.redis);
    try {
      const keys = queueKeys(queue);
      await s.scheduler.push({ id: 'b', account: 'default' }, ['ABC1D23', 'ABC1D24', 'ABC1D25']);
      await s.scheduler.enlist('default', 'b', 'normal', 1);
      const feed = () =>
        s.scheduler.feed(
          'default',
          keys,
          { key: s.keys.inflight('default'), cap: 10 },
          { key: s.keys.account('default'), field: 'capUntil' },
          0,
          1,
          T0,
        );
      // Three jobs taken in the last second, as BullMQ's moveToActive counts them.
      await s.ctx.redis.set(keys.limiter, '3', 'PX', 1_000);
      expect((await feed()).limitedMs).toBe(0);
      // A hold (queue/line.ts stopTaking): BullMQ's own switch.
      await queue.rateLimit(800);
      const held = await feed();
      expect(held.limitedMs).toBeGreaterThan(0);
      expect(held.limitedMs).toBeLessThanOrEqual(800);
    } finally {
      await queue.close();
    }
  });
});

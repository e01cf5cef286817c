// An `auto` account goes at its start rate (1/s, and no sooner than 1.5 s apart) until it hears a limit. The slots it took
// meanwhile count against the limit it then hears (pace-take's early list, pace-learn): on a
// 12/min key, three requests at 1/s followed by twelve more at 5 s put thirteen in one minute,
// which only a hold on `Remaining: 0` kept from a 429 (issue 21).
import { afterEach, describe, expect, it } from 'vitest';
import { Accounts } from '../../src/queue/accounts.js';
import { VqbKeys } from '../../src/redis/keys.js';
import { testConfig } from '../helpers/config.js';
import { type RedisTestContext, redisTestContext } from '../helpers/redis.js';
import { takeSlots, VirtualClock, virtualLine } from '../helpers/virtual-pace.js';

let ctx: RedisTestContext | undefined;
let accounts: Accounts | undefined;
afterEach(async () => {
  await accounts?.close();
  await ctx?.cleanup();
  ctx = undefined;
  accounts = undefined;
});

/**
 * The account's line on a clock the test owns (test/helpers/virtual-pace.ts): every slot is taken
 * at the same virtual instant, so a slot's wait is its offset exactly, however loaded the machine
 * (on Redis TIME, the calls' own spacing came off the offsets: 1,483 ms read for 1,500 in a run).
 */
let clock = new VirtualClock();
async function autoLine(label: string) {
  ctx = await redisTestContext(label);
  const config = testConfig(ctx.prefix, { VQ_RATE_LIMIT: 'auto' });
  clock = new VirtualClock();
  return virtualLine(config, ctx.redis, config.accounts[0]!, clock);
}

/** Slots taken one after another (a long horizon: each is reserved), as offsets from the first, ms. */
const take = takeSlots;

const announced = (limit: number, windowMs: number) => ({ limit, remaining: 0, windowMs, observedAt: clock.now });

describe('pace: the start rate before a limit is heard', () => {
  it('a 12/min limit heard after three slots at the start rate: the next comes three announced intervals after the first, and every 13 in a row span a minute', async () => {
    const line = await autoLine('pace-early');
    const early = await take(line, 3);
    // At the start rate (1/s), but no sooner than 1.5 s apart: time for the first answer to say
    // the limit before a second slot is taken.
    expect(early[1]! - early[0]!).toBeGreaterThanOrEqual(1_490);
    expect(early[2]! - early[1]!).toBeLessThan(1_550);
    const rate = await line.learn('ok', announced(12, 60_000), 25);
    expect(rate).toMatchObject({ source: 'announced', windowMs: 60_000 });
    const interval = (60_000 + 300) / 12;
    const later = await take(line, 12);
    const all = [...early, ...later];
    // Taken a few ms apart, so each wait is its slot's offset from now, give or take that.
    expect(later[0]! - early[0]!).toBeGreaterThanOrEqual(3 * interval - 50);
    for (let i = 12; i < all.length; i += 1) expect(all[i]! - all[i - 12]!).toBeGreaterThanOrEqual(60_000);
    // Paced at the announced interval from then on.
    expect(Math.abs(later[1]! - later[0]! - interval)).toBeLessThan(30);
  });

  it('a limit heard after one slot spaces the next by one interval; a second announcement moves nothing', async () => {
    const line = await autoLine('pace-early-one');
    const [first] = await take(line, 1);
    await line.learn('ok', announced(20, 1_000), 25);
    const [second] = await take(line, 1);
    const interval = (1_000 + 25) / 20;
    expect(second! - first!).toBeGreaterThanOrEqual(interval - 10);
    expect(second! - first!).toBeLessThan(interval + 50);
    await line.learn('ok', announced(20, 1_000), 25);
    const [third] = await take(line, 1);
    expect(Math.abs(third! - second! - interval)).toBeLessThan(30);
  });

  it('a slot given up and taken again (a late wake-up) counts once: the limit heard spaces from the one sent', async () => {
    const line = await autoLine('pace-early-retake');
    let slot = await line.slot(120_000);
    // Five late wake-ups in a row, each giving up its slot for the next.
    for (let i = 0; i < 5; i += 1) {
      if (!slot.reserved) throw new Error('not reserved');
      slot = await line.slot(120_000, slot.at);
    }
    if (!slot.reserved) throw new Error('not reserved');
    const sent = slot.waitMs;
    await line.learn('ok', announced(12, 60_000), 25);
    const [next] = await take(line, 1);
    const interval = (60_000 + 300) / 12;
    // One interval after the slot sent, not six after the first one taken (30 s).
    expect(next! - sent).toBeGreaterThanOrEqual(interval - 50);
    expect(next! - sent).toBeLessThan(interval + 50);
  });

  it('an early slot given up after the limit was heard (a worker woken late) gives its interval back', async () => {
    const line = await autoLine('pace-early-undo');
    const a = await line.slot(120_000);
    const b = await line.slot(120_000);
    if (!a.reserved || !b.reserved) throw new Error('not reserved');
    await line.learn('ok', announced(12, 60_000), 25);
    const interval = (60_000 + 300) / 12;
    // b was never sent: its retake is the slot one interval after a, not b's own plus one.
    const again = await line.slot(120_000, b.at);
    if (!again.reserved) throw new Error('not reserved');
    expect(again.waitMs - a.waitMs).toBeGreaterThanOrEqual(interval - 50);
    expect(again.waitMs - a.waitMs).toBeLessThan(interval + 50);
    const [next] = await take(line, 1);
    expect(Math.abs(next! - again.waitMs - interval)).toBeLessThan(30);
  });

  it("a limit whose resets all fall within 2 s, heard for less than 2 s: spread at the per-second reading, and its window said as a second's, so a request's lateness is judged as one", async () => {
    const line = await autoLine('pace-provisional');
    await take(line, 1);
    // X-RateLimit-Limit 30, Remaining 29, a reset 800 ms away: per second most likely, not proven.
    const said = { limit: 30, remaining: 29, resetAt: clock.now + 800, observedAt: clock.now };
    const rate = await line.learn('ok', said, 25);
    expect(rate.perSecond).toBeCloseTo(30_000 / 1_025, 3);
    // workers/flow.ts reads its lateness allowance off this window: a minute's (300 ms, half of it
    // allowed late) let a create 38 ms late through at the per-second pace, and 31 went in a second.
    expect(rate.windowMs).toBe(1_000);
    // Nothing left before the reset: paced at the per-minute reading, and said so.
    const spent = await line.learn('ok', { ...said, remaining: 0 }, 25);
    expect(spent.windowMs).toBe(60_000);
    expect(spent.perSecond).toBeCloseTo(0.5, 3);
  });

  it('a configured rate keeps no list: its slots are its own spacing only', async () => {
    ctx = await redisTestContext('pace-configured');
    const config = testConfig(ctx.prefix, { VQ_RATE_LIMIT: '10/s' });
    accounts = new Accounts(config, ctx.redis, new VqbKeys(config));
    const line = accounts.line(undefined);
    await take(line, 3);
    const fields = await ctx.redis.hgetall(new VqbKeys(config).pace(line.account.id));
    expect(fields.early).toBeUndefined();
    expect(fields.earlyN).toBeUndefined();
  });

  it('an early slot sent late (its write 100 ms after the slot) spaces what follows from when it left, once the limit is heard', async () => {
    const line = await autoLine('pace-early-late');
    const first = await line.slot(120_000);
    if (!first.reserved) throw new Error('expected a slot');
    expect(first.early).toBe(true);
    // Its write came 100 ms late (its connection opened first): the pace is told.
    await line.shift(first.at, 100);
    await line.learn('ok', announced(20, 1_000), 25);
    const second = await line.slot(120_000);
    if (!second.reserved) throw new Error('expected a slot');
    expect(second.early).toBeUndefined();
    const interval = (1_000 + 25) / 20;
    // One interval after when the first left, not after its slot: twenty more in a row then span
    // a second from the first as the upstream counted it.
    expect(Number(second.at) - Number(first.at)).toBeGreaterThanOrEqual(100 + interval - 1);
    expect(Number(second.at) - Number(first.at)).toBeLessThan(100 + interval + 50);
  });
});

// Two keys of a pool that are one quota upstream (queue/pool.ts says so) split the limit each
// announces: paced at the whole of it, the two sent twice what the quota takes and one of them
// drew half its requests refused to the end of the batch. On a clock the test owns
// (test/helpers/virtual-pace.ts), with Redis real: the spacing of the slots, no sleeps.
import { afterEach, describe, expect, it } from 'vitest';
import type { AccountLine } from '../../src/queue/line.js';
import { testConfig } from '../helpers/config.js';
import { type RedisTestContext, redisTestContext } from '../helpers/redis.js';
import { takeSlots, VirtualClock, virtualLine } from '../helpers/virtual-pace.js';

let ctx: RedisTestContext | undefined;
afterEach(async () => {
  await ctx?.cleanup();
  ctx = undefined;
});

let clock = new VirtualClock();
async function autoLine(label: string): Promise<AccountLine> {
  ctx = await redisTestContext(label);
  const config = testConfig(ctx.prefix, { VQ_RATE_LIMIT: 'auto' });
  clock = new VirtualClock();
  return virtualLine(config, ctx.redis, config.accounts[0]!, clock);
}

const heard = () => ({ limit: 20, remaining: 10, windowMs: 1_000, observedAt: clock.now });

/** The spacing of `n` slots taken one after another (each reserved), ms. */
async function spacing(line: AccountLine, n: number): Promise<number[]> {
  const waits = await takeSlots(line, n);
  return waits.slice(1).map((w, i) => w - waits[i]!);
}

describe('pace: keys that are one quota split what it announces', () => {
  it('marked as one quota with another key, a key paces at half the announced limit from its next answer; alone again once the mark ends', async () => {
    const line = await autoLine('pace-shared');
    const alone = await line.learn('ok', heard(), 25);
    expect(alone).toMatchObject({ perSecond: 20, source: 'announced' });
    const interval = (1_000 + 25) / 20;
    for (const gap of await spacing(line, 5)) expect(gap).toBeCloseTo(interval, 0);

    await line.markSharedQuota('other', clock.now + 60_000);
    expect(await line.sharedQuota()).toEqual(['other']);
    clock.now += 1_000;
    const shared = await line.learn('ok', heard(), 25);
    expect(shared).toMatchObject({ perSecond: 10, source: 'announced', changed: true });
    // The slots already reserved stand; the next ones are twice as far apart.
    const gaps = await spacing(line, 6);
    for (const gap of gaps.slice(1)) expect(gap).toBeCloseTo(2 * interval, 0);
    // A second key sharing it: a third each.
    await line.markSharedQuota('third', clock.now + 60_000);
    expect((await line.learn('ok', heard(), 25)).perSecond).toBeCloseTo(20 / 3, 5);

    clock.now += 61_000;
    expect(await line.sharedQuota()).toEqual([]);
    const after = await line.learn('ok', heard(), 25);
    expect(after).toMatchObject({ perSecond: 20, changed: true });
  });
});

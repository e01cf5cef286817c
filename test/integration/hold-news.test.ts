// Holds as news (queue/hold-news.ts): whoever sets, lengthens or lifts an account's hold publishes
// it, and a request that slept for its slot reads it from memory instead of asking Redis (a
// pace-held call a poll, issue 43). The news counts only while the subscription is known to be in
// place; otherwise the request asks, as before. A flow reading it: test/integration/flow-clock.test.ts.
import { Redis } from 'ioredis';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { HoldNews, holdMessage, readHoldMessage } from '../../src/queue/hold-news.js';
import { useHarness } from '../helpers/engine.js';
import { REDIS_URL } from '../helpers/redis.js';

const harness = useHarness();
const subscribers: Redis[] = [];
afterEach(() => {
  for (const s of subscribers.splice(0)) s.disconnect();
});

/** A subscriber of the harness's Redis, and a promise of the next message on it. */
function subscriber(): { redis: Redis; next: () => Promise<string> } {
  const redis = new Redis(REDIS_URL, { lazyConnect: false });
  subscribers.push(redis);
  return {
    redis,
    next: () =>
      new Promise((resolve) => redis.once('message', (_channel: string, message: string) => resolve(message))),
  };
}

describe('hold news', () => {
  it('messages: "<account> <ms>", anything else is not ours', () => {
    expect(holdMessage('acme', 1_200.4)).toBe('acme 1200');
    expect(readHoldMessage('acme 1200')).toEqual({ accountId: 'acme', ms: 1_200 });
    expect(readHoldMessage('acme 0')).toEqual({ accountId: 'acme', ms: 0 });
    for (const bad of ['acme', 'acme -1', 'acme x', 'acme 1 2', ' 5', 'acme '])
      expect(readHoldMessage(bad), bad).toBeUndefined();
  });

  it('a hold set is heard with its length, counted down on the listener clock; a lift is heard as 0', async () => {
    const h = await harness.start({ label: 'hold-news', workers: 0, config: { VQ_RATE_LIMIT: '2/s' } });
    let mono = 1_000;
    const news = new HoldNews({ monotonic: () => mono });
    const sub = subscriber();
    expect(news.heldFor(h.line.account.id)).toBeUndefined();
    await news.listen(sub.redis, h.services.keys);
    expect(news.heldFor(h.line.account.id)).toBe(0);

    let heard = sub.next();
    expect(await h.line.hold(30_000, 'rate_limit')).toBe(true);
    expect(await heard).toBe(`${h.line.account.id} 30000`);
    expect(news.heldFor(h.line.account.id)).toBe(30_000);
    mono += 29_000;
    expect(news.heldFor(h.line.account.id)).toBe(1_000);
    // Another account's hold is its own.
    expect(news.heldFor('other')).toBe(0);

    heard = sub.next();
    expect(await h.line.releaseHold()).toBe(true);
    expect(await heard).toBe(`${h.line.account.id} 0`);
    expect(news.heldFor(h.line.account.id)).toBe(0);
  });

  it('a cut connection: no answers until subscribed again (the request asks Redis meanwhile)', async () => {
    const h = await harness.start({ label: 'hold-news-cut', workers: 0, config: { VQ_RATE_LIMIT: '2/s' } });
    const news = new HoldNews();
    const sub = subscriber();
    await news.listen(sub.redis, h.services.keys);
    expect(news.live).toBe(true);
    const closed = new Promise((resolve) => sub.redis.once('close', resolve));
    const ready = new Promise((resolve) => sub.redis.once('ready', resolve));
    sub.redis.disconnect(true);
    await closed;
    expect(news.heldFor(h.line.account.id)).toBeUndefined();
    await ready;
    await vi.waitFor(() => expect(news.live).toBe(true), { timeout: 5_000, interval: 20 });
    const heard = sub.next();
    await h.line.hold(5_000, 'rate_limit');
    await heard;
    expect(news.heldFor(h.line.account.id)).toBeGreaterThan(4_000);
  });
});

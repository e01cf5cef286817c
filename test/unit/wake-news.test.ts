// The console's one subscription to new work (src/console/wake-news.ts): shared by every page that
// waits, closed with the server, and a subscription that fails leaves each page on its own timer.
import { describe, expect, it } from 'vitest';
import { WakeNews } from '../../src/console/wake-news.js';

/** A wake channel in memory: `publish` calls what is subscribed; counts opens and closes. */
function channel(fail = false) {
  const state = { opened: 0, closed: 0, onWake: undefined as ((account: string) => void) | undefined };
  const listen = async (onWake: (account: string) => void) => {
    state.opened++;
    if (fail) throw new Error('Redis away');
    state.onWake = onWake;
    return () => {
      state.closed++;
      state.onWake = undefined;
    };
  };
  return { state, listen, publish: (account: string) => state.onWake?.(account) };
}

describe('WakeNews', () => {
  it('one subscription for every hearer; each hears until it stops; close ends the subscription', async () => {
    const c = channel();
    const news = new WakeNews(c.listen);
    const a: string[] = [];
    const b: string[] = [];
    const [stopA, stopB] = await Promise.all([news.hear((x) => a.push(x)), news.hear((x) => b.push(x))]);
    expect(c.state.opened).toBe(1);
    c.publish('frota');
    expect(stopA).not.toBe(false);
    (stopA as () => void)();
    c.publish('seguros');
    expect(a).toEqual(['frota']);
    expect(b).toEqual(['frota', 'seguros']);
    expect(stopB).not.toBe(false);
    await news.close();
    expect(c.state.closed).toBe(1);
    c.publish('late');
    expect(b).toEqual(['frota', 'seguros']);
  });

  it('a subscription that fails says so (the page keeps its timer), and the next hearer tries again', async () => {
    const c = channel(true);
    const news = new WakeNews(c.listen);
    expect(await news.hear(() => {})).toBe(false);
    expect(await news.hear(() => {})).toBe(false);
    expect(c.state.opened).toBe(2);
    await news.close();
    expect(c.state.closed).toBe(0);
  });
});

import { afterEach, describe, expect, it } from 'vitest';
import { makePlates, startHarness, type Harness } from '../helpers/engine.js';

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

describe('exp', () => {
  it('rate', async () => {
    h = await startHarness({ label: 'exp', config: { VQ_RATE_LIMIT: process.env.RATE ?? '200/s', VQ_CONCURRENCY: '16', LOG_LEVEL: 'info' }, sim: { completionMs: [100, 300] } });
    const plates = makePlates(Number(process.env.N ?? 300));
    const t0 = Date.now();
    await h.enqueue('b1', plates);
    await h.waitForBatch('b1', 60_000);
    const stats = h.sim.stats({ plates: true });
    console.log((globalThis as any).__adm, 'elapsed', Date.now() - t0, 'creates', stats.creates, 'gets', stats.gets, 'maxInWindow', stats.maxInWindow, 'rl', stats.rateLimited);
    expect(stats.creates).toBe(plates.length);
  });
});

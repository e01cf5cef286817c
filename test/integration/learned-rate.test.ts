// `auto`: the rate of each account is learned from what the upstream says, one estimate per
// account shared in Redis by every process. Measured at the simulator (what it counted, what it
// refused), on real Redis, in scaled time: per-second windows, so the minutes of the real thing
// take seconds here (the per-minute scenarios run in `npm run bench -- --only learned`).
import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { describe, expect, it } from 'vitest';
import { estimateCost } from '../../src/producers/dry-run.js';
import { rowsFromPlates } from '../../src/producers/ingest.js';
import { accountFlow, type Harness, makePlates, sleep, useHarness } from '../helpers/engine.js';
import { harnessEnv, spawnVqb } from '../helpers/process.js';

const harness = useHarness();

/** Requests the simulator counted and 429s it sent for one key over `ms`, per second. */
async function measure(h: Harness, keyLabel: string, ms: number): Promise<{ perSecond: number; rateLimited: number }> {
  const a = h.sim.stats().byKey[keyLabel] ?? { counted: 0, rateLimited: 0 };
  await sleep(ms);
  const b = h.sim.stats().byKey[keyLabel] ?? { counted: 0, rateLimited: 0 };
  return { perSecond: ((b.counted - a.counted) * 1_000) / ms, rateLimited: b.rateLimited - a.rateLimited };
}

/** The rate in force as `vqb status` and the API read it. */
async function inForce(h: Harness, account = 'default') {
  return h.services.accounts.line(account).rate();
}

describe('learned rate (auto)', () => {
  it('20/s per-second window, no rate-limit headers, rate unset: ≥ 0.90 of the limit once learned, at most 5 429s a minute', async () => {
    const h = await harness.start({
      label: 'learn-429',
      config: { VQ_RATE_LIMIT: 'auto', VQ_CONCURRENCY: '16' },
      sim: { rateLimit: '20/s', window: 'sliding', rateLimitHeaders: false, completionMs: [200, 500] },
    });
    await h.enqueue('l', makePlates(1_200));
    await sleep(30_000);
    const m = await measure(h, 'key1', 30_000);
    const rate = await inForce(h);
    console.log(
      `learned (no headers): ${m.perSecond.toFixed(1)}/s of 20/s, ${m.rateLimited} 429s in 30 s; in force ${rate.perSecond.toFixed(1)}/s (${rate.source})`,
    );
    expect(m.perSecond / 20).toBeGreaterThanOrEqual(0.9);
    expect(m.rateLimited).toBeLessThanOrEqual(2.5);
    expect(rate.source).toBe('learned');
    expect(rate.perSecond).toBeLessThanOrEqual(21);
  }, 90_000);

  it('configured too high (40/s against a 20/s key, no headers): followed below it the same way', async () => {
    const h = await harness.start({
      label: 'learn-cap',
      config: { VQ_RATE_LIMIT: '40/s', VQ_CONCURRENCY: '16' },
      sim: { rateLimit: '20/s', window: 'sliding', rateLimitHeaders: false, completionMs: [200, 500] },
    });
    await h.enqueue('c', makePlates(1_200));
    await sleep(20_000);
    const m = await measure(h, 'key1', 24_000);
    const rate = await inForce(h);
    console.log(
      `configured 40/s on a 20/s key: ${m.perSecond.toFixed(1)}/s, ${m.rateLimited} 429s in 24 s; in force ${rate.perSecond.toFixed(1)}/s (${rate.source})`,
    );
    expect(m.perSecond / 20).toBeGreaterThanOrEqual(0.9);
    expect(m.rateLimited).toBeLessThanOrEqual(2);
    expect(rate).toMatchObject({ source: 'learned', ceilingPerSecond: 40 });
  }, 90_000);

  it('headers announce the limit: adopted at once, 0 429s', async () => {
    const h = await harness.start({
      label: 'learn-announced',
      config: { VQ_RATE_LIMIT: 'auto', VQ_CONCURRENCY: '16' },
      sim: { rateLimit: '20/s', window: 'sliding', completionMs: [200, 500] },
    });
    await h.enqueue('a', makePlates(600));
    await sleep(8_000);
    const m = await measure(h, 'key1', 15_000);
    const rate = await inForce(h);
    console.log(
      `announced: ${m.perSecond.toFixed(1)}/s of 20/s, ${m.rateLimited} 429s; in force ${rate.perSecond.toFixed(2)}/s (${rate.source}, window ${rate.windowMs} ms)`,
    );
    expect(rate).toMatchObject({ source: 'announced', limit: 20, windowMs: 1_000 });
    // Paced at 0.976 of the limit (the 25 ms jitter allowance); a request later than half of it
    // takes the next slot, so a busy 2-core machine loses a few (a CI run read 18.9/s). The figure
    // itself is the bench's (`--only learned`); here: used, not crawling.
    expect(m.perSecond / 20).toBeGreaterThanOrEqual(0.9);
    expect(h.sim.stats().rateLimited).toBe(0);
    // Estimates use the rate in force, not where `auto` started (1/s).
    const estimate = await estimateCost(h.services, 'estimate', rowsFromPlates(makePlates(100, 90_000)));
    expect(estimate.ratePerSecond).toBe(20);
    expect(estimate.secondsAtRate).toBeLessThan(estimate.expectedRequests / 10);
  }, 60_000);

  it('a configured rate far from the limit the upstream announces: one warning with the value to set', async () => {
    const h = await harness.start({
      label: 'learn-mismatch',
      config: { VQ_RATE_LIMIT: '40/s' },
      sim: { rateLimit: '20/s', window: 'sliding', completionMs: [200, 500] },
    });
    await h.enqueue('m', makePlates(120));
    await h.waitForBatch('m', 60_000);
    const warnings = h.logs.lines.filter((l) => l.event === 'account.rate_mismatch');
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatchObject({ level: 40, configured: '40/s', announced: '20/s' });
    expect(String(warnings[0]!.msg)).toContain('set 20/s');
  }, 60_000);

  it('a limit that drops from 30/s to 10/s and back (no headers) is followed within 60 s each way', async () => {
    const h = await harness.start({
      label: 'learn-change',
      config: { VQ_RATE_LIMIT: 'auto', VQ_CONCURRENCY: '16' },
      sim: { rateLimit: '30/s', window: 'sliding', rateLimitHeaders: false, completionMs: [200, 500] },
    });
    await h.enqueue('d', makePlates(3_000));
    await sleep(22_000);
    const before = await measure(h, 'key1', 8_000);
    h.sim.update({ rateLimit: '10/s' });
    await sleep(20_000);
    const cut = await measure(h, 'key1', 10_000);
    h.sim.update({ rateLimit: '30/s' });
    await sleep(50_000);
    const raised = await measure(h, 'key1', 10_000);
    console.log(
      `30/s: ${before.perSecond.toFixed(1)}/s; cut to 10/s, 20-30 s later: ${cut.perSecond.toFixed(1)}/s (${cut.rateLimited} 429s); back to 30/s, 50-60 s later: ${raised.perSecond.toFixed(1)}/s`,
    );
    expect(before.perSecond / 30).toBeGreaterThanOrEqual(0.85);
    expect(cut.perSecond / 10).toBeGreaterThanOrEqual(0.85);
    expect(cut.perSecond / 10).toBeLessThanOrEqual(1.05);
    expect(raised.perSecond / 30).toBeGreaterThanOrEqual(0.85);
  }, 150_000);

  it('three `vqb work` processes share one estimate; two accounts with different unknown limits learn independently', async () => {
    const h = await harness.start({
      label: 'learn-shared',
      workers: 0,
      accounts: [
        { id: 'frota', rateLimit: 'auto', key: { rateLimit: '8/s' } },
        { id: 'seguros', rateLimit: 'auto', key: { rateLimit: '24/s' } },
      ],
      sim: { window: 'sliding', rateLimitHeaders: false, completionMs: [200, 500] },
    });
    await h.enqueue('f', makePlates(600), { account: 'frota' });
    await h.enqueue('s', makePlates(1_200, 5_000), { account: 'seguros' });
    const children: ChildProcess[] = [];
    try {
      for (let i = 0; i < 3; i++)
        children.push(
          spawnVqb(['work'], harnessEnv(h, { VQ_RATE_LIMIT: 'auto', VQ_CONCURRENCY: '8', VQ_PACING_JITTER: '50ms' }))
            .child,
        );
      await sleep(35_000);
      const [frota, seguros] = await Promise.all([measure(h, 'frota', 20_000), measure(h, 'seguros', 20_000)]);
      const [rf, rs] = await Promise.all([inForce(h, 'frota'), inForce(h, 'seguros')]);
      console.log(
        `3 processes: frota ${frota.perSecond.toFixed(1)}/s of 8 (${rf.perSecond.toFixed(1)} ${rf.source}), seguros ${seguros.perSecond.toFixed(1)}/s of 24 (${rs.perSecond.toFixed(1)} ${rs.source})`,
      );
      // One estimate per account in Redis (not one per process): each paced near its own limit.
      expect(rf.source).toBe('learned');
      expect(rs.source).toBe('learned');
      expect(frota.perSecond / 8).toBeGreaterThanOrEqual(0.85);
      expect(seguros.perSecond / 24).toBeGreaterThanOrEqual(0.85);
      expect(rf.perSecond).toBeLessThan(rs.perSecond / 2);
      expect(await h.services.redis.exists(h.services.keys.pace('frota'), h.services.keys.pace('seguros'))).toBe(2);
    } finally {
      for (const c of children) {
        c.kill('SIGTERM');
        await once(c, 'exit');
      }
    }
  }, 120_000);

  it('a process with no answer of its own measures lateness against the window another process heard: 60 ms late on a 12/min key keeps its slot', async () => {
    const h = await harness.start({ label: 'heard-window', workers: 0, config: { VQ_RATE_LIMIT: 'auto' } });
    // Another process heard the upstream announce 12 a minute (its window allows 150 ms late).
    await h.line.learn('ok', { limit: 12, remaining: 11, windowMs: 60_000 }, 25);
    // This process has had no answer: its own idea of the window is the start rate's second,
    // whose allowance is 25 ms (12.5 ms late at most). Woken 60 ms late (a busy host), the
    // request keeps its slot instead of giving it up for one 5 s away.
    const flow = accountFlow(h);
    const admission = await flow.admitPoll('normal');
    if (!admission.go) throw new Error('expected a slot');
    await sleep(60);
    const started = performance.now();
    await flow.send(admission).ready?.();
    expect(performance.now() - started).toBeLessThan(500);
    // The next slot is the one after it (an interval away), not two: nothing was given up.
    const next = await h.line.slot(60_000);
    expect(next.reserved).toBe(true);
    expect(next.waitMs).toBeLessThan(5_025 - 50);
    expect(next.waitMs).toBeGreaterThan(5_025 - 400);
  });
});

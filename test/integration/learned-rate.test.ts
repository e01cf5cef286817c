// `auto`: the rate of each account is learned from what the upstream says, one estimate per
// account shared in Redis by every process. The learner's arithmetic (shares, 429s, limits that
// change, processes that share an estimate) runs on a clock the test owns in pace-clock.test.ts;
// rates on the wall clock are the bench's (`npm run bench -- --only learned`). Here: what the
// learner tells the rest of vqb (estimates, a warning) and a lateness rule.
import { describe, expect, it } from 'vitest';
import { estimateCost } from '../../src/producers/dry-run.js';
import { rowsFromPlates } from '../../src/producers/ingest.js';
import { accountFlow, type Harness, makePlates, sleep, useHarness } from '../helpers/engine.js';

const harness = useHarness();

/** The rate in force as `vqb status` and the API read it. */
async function inForce(h: Harness, account = 'default') {
  return h.services.accounts.line(account).rate();
}

describe('learned rate (auto)', () => {
  it('headers announce the limit: adopted at once, and estimates use it', async () => {
    // The pace under an announced limit (0 refused, cold start included) is pace-clock.test.ts's,
    // on a clock the test owns; its rate on the wall clock is the bench's (`--only learned`).
    const h = await harness.start({ label: 'learn-announced', workers: 0, config: { VQ_RATE_LIMIT: 'auto' } });
    await h.line.learn('ok', { limit: 20, remaining: 19, windowMs: 1_000, resetAt: Date.now() + 1_000 }, 25);
    expect(await inForce(h)).toMatchObject({ source: 'announced', limit: 20, windowMs: 1_000 });
    // Estimates use the rate in force, not where `auto` started (1/s).
    const estimate = await estimateCost(h.services, 'estimate', rowsFromPlates(makePlates(100, 90_000)));
    expect(estimate.ratePerSecond).toBe(20);
    expect(estimate.secondsAtRate).toBeLessThan(estimate.expectedRequests / 10);
  });

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

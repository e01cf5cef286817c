// `auto`: the rate of each account is learned from what the upstream says, one estimate per
// account shared in Redis by every process. The learner's arithmetic (shares, 429s, limits that
// change, processes that share an estimate) runs on a clock the test owns in pace-clock.test.ts;
// rates on the wall clock are the bench's (`npm run bench -- --only learned`). Here: what the
// learner tells the rest of vqb (estimates, a warning). Its lateness rule (a window another
// process heard) is flow-clock.test.ts's.
import { describe, expect, it } from 'vitest';
import { estimateCost } from '../../src/producers/dry-run.js';
import { rowsFromPlates } from '../../src/producers/ingest.js';
import { type Harness, makePlates, useHarness } from '../helpers/engine.js';

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
});

// A key that stops with queries paid on it (issue 43): only the key that created a query reads it,
// so when a pool's key expires mid-batch its paid plates wait for it, the other keys finish the
// rest, and `vqb run` ends (exit 3, naming the key and what to do) instead of waiting for good.
// `vqb status` and the batch's JSON say how many plates wait for which key; once the key is
// renewed and the account resumed, the same command reads them: every plate created once.
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { upstreamOf } from '../../src/queue/answers.js';
import { accountKey, makePlates, useHarness } from '../helpers/engine.js';
import { harnessEnv, runVqb, waitFor } from '../helpers/process.js';

const harness = useHarness();

describe('a key that stops with paid plates on it', () => {
  it('vqb run ends naming the key; status says how many wait; resumed, they are read and nothing is paid twice', async () => {
    const h = await harness.start({
      label: 'stranded',
      workers: 0,
      // Answers slower than the key lives on: the plates kb created are unread when it expires.
      sim: { completionMs: [3_000, 4_000], rateLimit: '20/s', dailyQuota: 1_000_000 },
      accounts: [
        { id: 'ka', fields: { pool: 'fleet' } },
        { id: 'kb', fields: { pool: 'fleet' } },
      ],
    });
    // First contact is not what this shows: both keys' upstream was met before.
    for (const account of h.config.accounts)
      await h.services.answers.learn(account.id, {}, Date.now(), upstreamOf(account));
    const plates = makePlates(80);
    const file = join(h.config.outDir, '..', 'fleet.csv');
    await writeFile(file, `placa\n${plates.join('\n')}\n`);
    const env = harnessEnv(h, { VQ_RATE_LIMIT: '20/s' });

    const running = runVqb(['run', file, '--pool', 'fleet'], env);
    // kb expires once it has created a few plates (a time fixed in advance passed before its first
    // create when a loaded machine was slow to start the run: nothing was stranded).
    await waitFor(async () => (h.sim.stats().byKey.kb?.counted ?? 0) >= 5, 60_000, 'kb creating');
    expect(h.sim.keys.expire(accountKey('kb'))).toBe(true);
    const run = await running;
    expect(run.code).toBe(3);
    expect(run.stderr).toMatch(/plates? paid with account kb's key wait for it/);
    expect(run.stderr).toContain('EXPIRED_API_KEY');
    expect(run.stderr).toContain('vqb resume --account kb');
    const byKey = h.sim.stats().byKey;
    const stranded = Number(/(\d+) plates? paid with account kb/.exec(run.stderr)?.[1]);
    expect(stranded).toBeGreaterThan(0);

    const batchId = /batch (\S+):/.exec(run.stdout)?.[1] ?? '';
    const shown = await runVqb(['status', batchId, '--json'], env);
    expect(shown.code, run.stdout).toBe(0);
    const view = JSON.parse(shown.stdout) as { waitingForKeys?: { account: string; plates: number; code: string }[] };
    expect(view.waitingForKeys).toEqual([
      expect.objectContaining({ account: 'kb', plates: stranded, code: 'EXPIRED_API_KEY' }),
    ]);
    const text = await runVqb(['status', batchId], env);
    expect(text.stdout).toContain(`${stranded} plates paid with account kb's key wait for it`);

    // The key renewed upstream, the account resumed: the same command reads the paid plates.
    h.sim.keys.add({ key: accountKey('kb'), label: 'kb' });
    expect((await runVqb(['resume', '--account', 'kb'], env)).code).toBe(0);
    const again = await runVqb(['run', file, '--pool', 'fleet'], env);
    expect(again.stderr).toBe('');
    expect(again.code).toBe(0);
    const stats = h.sim.stats({ plates: true });
    expect(stats.creates).toBe(plates.length);
    expect(Object.values(stats.createsByPlate ?? {}).every((n) => n === 1)).toBe(true);
    expect(byKey.kb?.counted ?? 0).toBeGreaterThan(0);
  }, 150_000);
});

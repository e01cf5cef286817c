// `vqb status` says only what is true of a batch nothing moves: with no worker alive, or its account
// paused, the batch is waiting (not running) and its share of the account's creates is what it gets
// once the account moves again, not "now". Run as a user runs it, in process (runVqb).
import { describe, expect, it } from 'vitest';
import { makePlates, useHarness } from '../helpers/engine.js';
import { harnessEnv, runVqb, waitFor } from '../helpers/process.js';

const harness = useHarness();

describe('vqb status of a batch nothing moves', () => {
  it('no worker, then a paused account: waiting, its share "once the account moves again"; running once it moves', async () => {
    // Queries take 5 s upstream: the batch is still running when the last status is read.
    const h = await harness.start({ label: 'status-truth', workers: 0, sim: { completionMs: [5_000, 5_000] } });
    await h.enqueue('nobody-runs', makePlates(5, 700));
    const env = harnessEnv(h);
    const status = async (...args: string[]) => {
      const done = await runVqb(['status', ...args], env);
      expect(done.code, done.stderr).toBe(0);
      return done.stdout;
    };
    const stopped = async (why: RegExp) => {
      const one = await status('nobody-runs');
      expect(one).toMatch(/^batch nobody-runs \(library: nobody-runs\) — waiting$/m);
      expect(one).toMatch(why);
      expect(one).toMatch(/; once the account moves again, this batch gets 100 % of the account's creates$/m);
      expect(one).not.toMatch(/creates now/);
      const all = await status();
      expect(all).toMatch(
        /^ {2}batch nobody-runs: normal, weight 1, 100 % of the creates once the account moves again$/m,
      );
      expect(all).toMatch(/^batch nobody-runs \(library: nobody-runs\) — waiting$/m);
    };

    await stopped(/^ {2}account default: no worker is running/m);
    await h.line.pauseByOperator();
    h.startWorker();
    await stopped(/^ {2}account default: paused: by an operator \(vqb pause\)/m);

    await h.line.resume();
    await waitFor(
      async () => /^batch nobody-runs \(library: nobody-runs\) — running$/m.test(await status('nobody-runs')),
      20_000,
      'running',
    );
  }, 60_000);
});

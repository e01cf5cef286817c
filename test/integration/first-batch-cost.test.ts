// What a newcomer's first batch costs (issue 36, defect 3): a fresh deployment (nothing learned,
// every poll setting at its default, the rate `auto`) against an upstream whose queries take
// 5-15 s, as `vqb simulate` answers by default. Polls spend quota like creates, so the README's
// "a plate costs close to two requests" has to hold from the first batch, and the dry run's
// figure has to be the one the run then spends.
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ingestList } from '../../src/producers/enqueue.js';
import { PollLearner } from '../../src/queue/poll-schedule.js';
import { makePlates, useHarness } from '../helpers/engine.js';
import { harnessEnv, runVqb } from '../helpers/process.js';

const harness = useHarness();

/** 20 plates of the old and the Mercosul kind, as a user's small fleet file. */
function fleet(): string[] {
  return Array.from({ length: 20 }, (_, i) =>
    i % 2 === 0 ? `FRT${String(1000 + i)}` : `FRT${i % 10}A${String(10 + i).padStart(2, '0')}`,
  );
}

describe('the first batch of a fresh deployment', () => {
  it('against answers of 5-15 s costs at most 2.5 requests a plate, and the dry run said about as much', async () => {
    const h = await harness.start({
      label: 'first-batch',
      workers: 0,
      sim: { completionMs: [5_000, 15_000], rateLimit: '600/min' },
    });
    // The defaults a newcomer has: no poll timing and no rate set (the harness scales them down).
    const env = harnessEnv(h);
    delete env.VQ_POLL_INITIAL;
    delete env.VQ_POLL_INTERVAL;
    delete env.VQ_RATE_LIMIT;
    // …and the production lock (harnessEnv's 2 s lock, renewed each second, is lost now and
    // then on a loaded machine while a poll waits in the worker: a warning, nothing paid twice).
    delete env.VQ_LOCK_DURATION;
    delete env.VQ_STALLED_INTERVAL;
    const file = join(h.config.outDir, '..', 'frota.csv');
    await writeFile(file, `placa\n${fleet().join('\n')}\n`);

    const dry = await runVqb(['run', '--dry-run', file], env);
    expect(dry.code).toBe(0);
    const estimated = Number(/\((\d+) requests\)/.exec(dry.stdout)?.[1]);
    expect(estimated).toBeGreaterThan(0);
    // Its time says what it rests on: no rate was heard yet, and no result comes before the first poll.
    expect(dry.stdout).toContain('no limit heard from the upstream yet');
    expect(dry.stdout).toContain('first results after about 15 s');

    const run = await runVqb(['run', file], env);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    const stats = h.sim.stats();
    expect(stats.creates).toBe(20);
    const spent = stats.creates + stats.gets;
    // What the run printed is what the upstream counted.
    expect(run.stdout).toContain(`${(spent / 20).toFixed(2)} requests per finished plate`);
    expect(spent / 20).toBeLessThanOrEqual(2.5);
    expect(Math.abs(estimated - spent) / spent).toBeLessThanOrEqual(0.3);
  }, 150_000);

  it('that started too late comes down to the answers in one batch, from the time each query took', async () => {
    // 15 s is right for answers of 5-15 s; against an upstream answering in 0.1-0.3 s it is late. Each
    // finished first poll says how long its query took (the answer's createdAt/completedAt), so the
    // first batch's polls bring the estimate down to the 90 % point at once, not by a quarter a round.
    const h = await harness.start({
      label: 'first-batch-late',
      sim: { completionMs: [100, 300] },
      config: { VQ_POLL_INITIAL: '5s', VQ_RATE_LIMIT: '200/s' },
    });
    await ingestList(h.services, makePlates(300), { source: 'library', batchId: 'late' });
    await h.waitForBatch('late', 60_000);
    await Promise.all(h.workers.map((w) => w.close()));
    const learned = await new PollLearner(h.services.redis, h.services.keys, h.config.poll).snapshot(h.config.product);
    // Every plate but the one that met the upstream (polled on a schedule of its own: first contact).
    expect(learned.samples).toBe(299);
    // Answers of at most 300 ms: the 90 % point is 280 ms; a quarter a round would have left 3.7 s.
    expect(learned.firstPollMs).toBeLessThan(600);
    expect(learned.firstPollMs).toBeGreaterThan(150);
  }, 90_000);
});

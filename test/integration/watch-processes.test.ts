// Watch rounds with several `vqb work` processes: BullMQ's job scheduler makes one job per due
// time, so each round fires once however many processes run; a process killed mid-round leaves
// the round to the others (finished, no plate paid twice) and the next round comes on time.
import { afterEach, describe, expect, it } from 'vitest';
import { Watches } from '../../src/watch/watches.js';
import { type Harness, startHarness } from '../helpers/engine.js';
import { harnessEnv, spawnVqb, type VqbProcess, waitFor } from '../helpers/process.js';

const N = 100;
const EVERY_MS = 10_000;
const PLATES = Array.from({ length: N }, (_, i) => `PRC${String(i).padStart(4, '0')}`);

let h: Harness | undefined;
const procs: VqbProcess[] = [];
const open: Watches[] = [];
afterEach(async () => {
  for (const p of procs.splice(0)) if (p.child.exitCode === null) p.child.kill('SIGKILL');
  for (const w of open.splice(0)) await w.close();
  await h?.close();
  h = undefined;
});

describe('watch rounds across processes', () => {
  it('two processes: a round fires once; one killed mid-round: it ends, none paid twice, next on time', async () => {
    h = await startHarness({
      label: 'watch-procs',
      sim: { completionMs: [200, 400] },
      config: { VQ_WATCH_MIN_EVERY: '1s' },
    });
    await h.services.answers.learn('default', { id: '/body/queryId', status: '/body/status' }, Date.now());
    const env = harnessEnv(h, { VQ_WATCH_MIN_EVERY: '1s', VQ_WATCH_SWEEP: '250ms', VQ_RATE_LIMIT: '300/s' });
    const a = spawnVqb(['work'], env, 85_000);
    const b = spawnVqb(['work'], env, 85_000);
    procs.push(a, b);
    const watches = new Watches(h.services, h.logs.logger);
    open.push(watches);
    const ref = { account: 'default', name: 'fleet' };
    await watches.add({ name: 'fleet', every: `${EVERY_MS}ms` }, PLATES, ['default']);
    const round = (n: number) => watches.store.round(ref, n);

    await waitFor(async () => (await round(2))?.closedAt !== undefined, 40_000, 'round 2 compared');
    // Round 3 under way: a third of its plates created, then one process dies at once.
    await waitFor(
      async () => (await round(3)) !== undefined && h!.sim.stats().creates >= 2 * N + N / 3,
      20_000,
      'round 3 under way',
    );
    a.child.kill('SIGKILL');
    await a.done;
    await waitFor(async () => (await round(4))?.closedAt !== undefined, 40_000, 'round 4 compared');
    b.child.kill('SIGTERM');
    await b.done;

    // Each round fired once: one scheduler job per due time, taken by one process. A due time
    // that found the round before still running said so ('overlap') and was not a second round.
    const all = await watches.store.rounds(ref);
    const jobs = await watches.schedules.queue.getJobs(['completed']);
    expect(new Set(jobs.map((j) => j.id)).size).toBe(jobs.length);
    for (const job of jobs) {
      const at = job.processedOn ?? 0;
      if (job.returnvalue === 'overlap')
        expect(all.some((r) => r.startedAt <= at && (r.closedAt ?? Number.POSITIVE_INFINITY) > at)).toBe(true);
      else expect(job.returnvalue).toBe('started');
    }
    expect(jobs.filter((j) => j.returnvalue === 'started')).toHaveLength(all.length);
    const rounds = (await watches.store.rounds(ref)).filter((r) => r.round <= 4);
    expect(rounds.map((r) => r.batchId)).toEqual([1, 2, 3, 4].map((n) => `watch-fleet-${n}`));
    // No plate paid twice: every plate created once a round, round 3 (the killed one) included.
    // The one exception is the documented one: a create the SIGKILL cut off between request and
    // stored answer is re-sent (VQ_RECREATE_UNCERTAIN) and flagged "possible duplicate" in round 3.
    const stats = h.sim.stats({ plates: true });
    const byPlate = Object.entries(stats.createsByPlate ?? {});
    const done = (await watches.store.rounds(ref)).length;
    expect(byPlate).toHaveLength(N);
    expect(Math.min(...byPlate.map(([, n]) => n))).toBeGreaterThanOrEqual(4);
    const third = await h.services.batches.ref('watch-fleet-3', ['default']);
    const repeated = byPlate.filter(([, n]) => n > done);
    for (const [plate, n] of repeated) {
      expect(n, plate).toBe(done + 1);
      expect((await h.services.outcomes.get(third, plate))?.possibleDuplicate, `${plate} repeated, not flagged`).toBe(
        true,
      );
    }
    expect(repeated.length).toBeLessThanOrEqual((await h.services.batchViews.get(third)).counts.possibleDuplicates);
    expect((await round(3))?.creates).toBe(N);
    // The next round on time: started by its own due time, at that time (not held up by the killed one).
    const due = jobs
      .map((j) => /^repeat:.*:(\d+)$/.exec(j.id ?? '')?.[1])
      .filter((d) => d !== undefined)
      .map(Number)
      .sort((x, y) => x - y);
    const fourth = due.find((d) => d <= rounds[3]!.startedAt && rounds[3]!.startedAt - d < 2_000);
    expect(fourth, `round 4 at ${rounds[3]!.startedAt}, due times ${due.join(' ')}`).toBeDefined();
  }, 88_000);
});

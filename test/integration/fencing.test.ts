// Fencing: a worker paused past its job's lock (SIGSTOP, as a frozen container or a suspended VM
// would be) never sends a create the job's new holder sends too without a flag, and never writes
// its older step over a newer one. Counted at the simulator: what was paid, not what vqb recorded.
import type { ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import type { Outcome } from '../../src/queue/types.js';
import { type Harness, makePlates, sleep, useHarness } from '../helpers/engine.js';
import { harnessEnv, spawnVqb, type VqbProcess, waitFor } from '../helpers/process.js';

const harness = useHarness();

/** The process state letter from /proc (T = stopped). */
function state(pid: number): string {
  return readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.[0] ?? '?';
}

function jsonLines(text: string): Record<string, unknown>[] {
  return text
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((line) => {
      try {
        return JSON.parse(line) as Record<string, unknown>;
      } catch {
        throw new Error(`not a JSON log line: ${line.slice(0, 300)}`);
      }
    });
}

async function outcomesOf(h: Harness, batchId: string): Promise<Outcome[]> {
  const out: Outcome[] = [];
  for await (const o of h.services.outcomes.scan(await h.services.batches.ref(batchId))) out.push(o);
  return out;
}

async function stop(procs: VqbProcess[]): Promise<void> {
  for (const p of procs) {
    if (p.child.exitCode !== null || p.child.signalCode !== null) continue;
    p.child.kill('SIGCONT');
    p.child.kill('SIGTERM');
  }
  await Promise.all(procs.map((p) => p.done));
}

describe('fencing', () => {
  it('a worker paused between its fencing check and the send: the next owner sends again flagged, and the late send is counted as a possible duplicate', async () => {
    const h = await harness.start({ label: 'fence-window', workers: 0, sim: { completionMs: [300, 600] } });
    await h.enqueue('w', makePlates(1));
    const env = harnessEnv(h, { VQ_LOCK_DURATION: '2s', VQ_STALLED_INTERVAL: '1s', LOG_LEVEL: 'info' });
    const frozen = spawnVqb(['work'], { ...env, VQB_TEST_STOP_AFTER_FENCE: '1' });
    const procs = [frozen];
    try {
      const pid = frozen.child.pid!;
      await waitFor(async () => state(pid) === 'T', 30_000, 'the first worker stopped itself after the fence');
      expect(h.sim.stats().creates).toBe(0);
      const next = spawnVqb(['work'], env);
      procs.push(next);
      await h.waitForBatch('w', 30_000);
      const [outcome] = await outcomesOf(h, 'w');
      expect(outcome).toMatchObject({ status: 'done', possibleDuplicate: true });
      // The frozen worker wakes up and sends the create it had passed the fence for: paid twice,
      // and the plate says so.
      frozen.child.kill('SIGCONT');
      await waitFor(async () => h.sim.stats().creates === 2, 15_000, 'the late create reached the upstream');
      await sleep(500);
      await stop(procs);
      // vqb logs to stderr (stdout is for what a person asked for).
      const lines = jsonLines((await frozen.done).stderr);
      const lost = lines.filter((l) => l.event === 'job.lock_lost');
      expect(lost.length).toBeGreaterThan(0);
      expect(lost.every((l) => l.level === 40 && typeof l.jobId === 'string')).toBe(true);
      expect(lost.map((l) => l.when)).toContain('create-superseded');
      expect(lines.filter((l) => l.msg === 'redis client error')).toEqual([]);
      expect((await h.services.batchViews.get('w')).counts).toMatchObject({
        done: 1,
        inflight: 0,
        possibleDuplicates: 1,
      });
    } finally {
      await stop(procs);
    }
  }, 90_000);

  it('two workers, one frozen past its lock three times mid-batch: every plate created twice is flagged, nothing left in flight', async () => {
    // Answers take 200–400 ms, so the frozen worker always holds creates in flight when it stops.
    const h = await harness.start({
      label: 'fence-freeze',
      workers: 0,
      sim: { rateLimit: '30/s', window: 'sliding', completionMs: [200, 800], latencyMs: [200, 400] },
    });
    await h.enqueue('f', makePlates(150));
    const env = harnessEnv(h, {
      VQ_RATE_LIMIT: '25/s',
      VQ_CONCURRENCY: '6',
      VQ_LOCK_DURATION: '1500ms',
      VQ_STALLED_INTERVAL: '1s',
      VQ_PACING_JITTER: '50ms',
      LOG_LEVEL: 'info',
    });
    const procs: VqbProcess[] = [spawnVqb(['work'], env), spawnVqb(['work'], env)];
    const victim: ChildProcess = procs[0]!.child;
    // Frozen before its worker ran (a start takes seconds on a loaded CI machine), it would hold
    // no lock and watch no loop: its pauses count from its first line.
    await new Promise<void>((started) => {
      let seen = '';
      victim.stderr!.on('data', (chunk: Buffer) => {
        seen += chunk.toString();
        if (seen.includes('"msg":"worker started"')) started();
      });
    });
    try {
      for (let i = 0; i < 3; i++) {
        await sleep(800 + i * 300);
        if ((await h.services.batchViews.get('f')).finishedAt !== undefined) break;
        victim.kill('SIGSTOP');
        await sleep(4_000);
        victim.kill('SIGCONT');
      }
      await h.waitForBatch('f', 60_000);
      await sleep(1_000);
      await stop(procs);
      const stats = h.sim.stats({ plates: true });
      const outcomes = await outcomesOf(h, 'f');
      expect(outcomes).toHaveLength(150);
      const flagged = new Set(outcomes.filter((o) => o.possibleDuplicate).map((o) => o.plate));
      const twice = Object.entries(stats.createsByPlate ?? {}).filter(([, n]) => n > 1);
      const unflagged = twice.filter(([plate]) => !flagged.has(plate));
      expect(unflagged).toEqual([]);
      const counts = (await h.services.batchViews.get('f')).counts;
      expect(counts).toMatchObject({ done: 150, failed: 0, inflight: 0 });
      let lockLosses = 0;
      // The frozen worker says, once per pause, that it was stalled past its locks.
      const stalls = jsonLines((await procs[0]!.done).stderr).filter((l) => l.event === 'process.stalled');
      expect(stalls.length).toBeGreaterThanOrEqual(1);
      expect(stalls.every((l) => l.level === 40 && Number(l.stalledMs) >= 1_500)).toBe(true);
      for (const p of procs) {
        const lines = jsonLines((await p.done).stderr);
        expect(lines.filter((l) => l.msg === 'redis client error')).toEqual([]);
        lockLosses += lines.filter((l) => l.event === 'job.lock_lost').length;
      }
      console.log(
        `fencing: ${stats.creates} creates for 150 plates, ${twice.length} created twice, ${flagged.size} flagged, ${unflagged.length} unflagged, ${lockLosses} lock-loss lines`,
      );
      // The pauses did take jobs from the frozen worker (else this test shows nothing).
      expect(lockLosses).toBeGreaterThan(0);
    } finally {
      await stop(procs);
    }
  }, 120_000);
});

// Proof under failure. One batch, three `vqb work` processes, a dedicated Redis with AOF, and a
// seeded schedule of faults: workers SIGKILLed and restarted, Redis restarted (SIGTERM or SIGKILL),
// 5xx storms, dropped connections, slow answers, the key expiring and being rotated, and the export
// directory made unusable while `vqb export` runs. Afterwards every promise is checked from the
// outside: one outcome per plate, one create per plate unless flagged "possible duplicate", an empty
// queue, exports that match the outcomes, and the API key nowhere.
//
// Redis durability: AOF with `appendfsync always` writes and fsyncs every write before Redis
// replies, so a SIGKILLed Redis loses nothing it acknowledged (a SIGTERMed one loses nothing
// either way: it fsyncs on shutdown). With `everysec` a SIGKILL may lose up to about a second of
// acknowledged writes (a stored queryId, an outcome), which no application can make up for.
//
//   npm run build && npx vitest run --config test/chaos/vitest.config.ts        (CI size)
//   CHAOS_FULL=1 …   1,000 plates, ≥ 10 kills     CHAOS_SEED=n …   replay a schedule
import { randomBytes, randomInt } from 'node:crypto';
import { mkdtemp, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'csv-parse/sync';
import { afterAll, describe, expect, it } from 'vitest';
import type { Config } from '../../src/config.js';
import { ingest, rowsFromPlates } from '../../src/producers/ingest.js';
import { openQueueServices, type QueueServices } from '../../src/queue/services.js';
import type { Outcome } from '../../src/queue/types.js';
import { startSimulator, type SimulatorHandle } from '../../src/simulator/index.js';
import { testConfig } from '../helpers/config.js';
import { makePlates, sleep } from '../helpers/engine.js';
import { startRedisServer, type DedicatedRedis } from '../helpers/redis-server.js';
import { canaryNeedles, findIn, scanDir, scanRedis, type Leak } from './leaks.js';
import { ProcessLog, type VqbProcess } from './procs.js';
import { mulberry32, shuffle, uniform } from './rng.js';

const FULL = process.env.CHAOS_FULL === '1';
const SEED = process.env.CHAOS_SEED ? Number(process.env.CHAOS_SEED) : randomInt(1, 2 ** 31);
const SIZE = FULL
  ? { plates: 1_000, killEvents: 10, redisRestarts: 3, storms: 2, rate: '12/s', finishMs: 10 * 60_000 }
  : { plates: 300, killEvents: 4, redisRestarts: 2, storms: 1, rate: '10/s', finishMs: 4 * 60_000 };
const WORKERS = 3;

type EventKind = 'kill' | 'redis' | 'storm-5xx' | 'storm-drop' | 'storm-slow' | 'key-rotation' | 'export-unwritable';

interface Summary {
  seed: number;
  size: string;
  plates: number;
  inputRows: number;
  kills: number;
  redisRestarts: { SIGTERM: number; SIGKILL: number };
  storms: Record<string, number>;
  simFaults: { errors: number; drops: number; dropsAfterCreate: number };
  keyRotations: number;
  exportFailures: number;
  possibleDuplicates: number;
  duplicateCreates: number;
  creates: number;
  requests: number;
  failed: number;
  durationS: number;
  chaosS: number;
  timeline: string[];
}

describe.skipIf(process.env.VQB_CHAOS !== '1')('chaos', () => {
  const procs = new ProcessLog();
  let redis: DedicatedRedis | undefined;
  let sim: SimulatorHandle | undefined;
  let services: QueueServices | undefined;
  let dir: string | undefined;

  afterAll(async () => {
    await procs.killAll();
    await services?.close().catch(() => {});
    await sim?.close();
    await redis?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it(`a ${SIZE.plates}-plate batch survives kills, Redis restarts, upstream storms, key rotation and an unwritable export dir`, async () => {
    const started = Date.now();
    const rng = mulberry32(SEED);
    const at = () => `+${((Date.now() - started) / 1000).toFixed(1)}s`;
    const timeline: string[] = [];
    const note = (line: string) => timeline.push(`${at()} ${line}`);
    console.log(`chaos: seed ${SEED} (${FULL ? 'full' : 'CI'} size; replay with CHAOS_SEED=${SEED})`);

    // --- the line: dedicated Redis with AOF, the simulator, the key file, the input ------------
    redis = await startRedisServer(['--appendonly', 'yes', '--appendfsync', 'always']);
    dir = await mkdtemp(join(tmpdir(), 'vqb-chaos-'));
    const outDir = join(dir, 'out');
    const keyFile = join(dir, 'api-key');
    const keys = [`sk-live-SECRET-canary-${randomBytes(8).toString('hex')}`, `sk-live-SECRET-canary-${randomBytes(8).toString('hex')}`] as const;
    await writeFile(keyFile, `${keys[0]}\n`);

    const valid = makePlates(SIZE.plates, 40_000);
    const failPlates = valid.filter((_, i) => i % 97 === 13); // ~1 %: queries that end FAILED upstream
    sim = await startSimulator({ completionMs: [300, 1_500], rateLimit: '1000/s', keys: [{ key: keys[0] }], failPlates }, { random: mulberry32(SEED ^ 0x5eed) });
    const prefix = `{vqbchaos-${randomBytes(3).toString('hex')}}`;
    const env: Record<string, string> = {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      REDIS_URL: redis.url,
      VQ_PREFIX: prefix,
      VQ_BASE_URL: sim.url,
      VQ_API_KEY_FILE: keyFile,
      VQ_OUT_DIR: outDir,
      VQ_RATE_LIMIT: SIZE.rate,
      VQ_CONCURRENCY: '8',
      VQ_POLL_INITIAL: '500ms',
      VQ_POLL_INTERVAL: '300ms',
      VQ_POLL_MAX_INTERVAL: '2s',
      VQ_POLL_DEADLINE: '3m',
      // Storms must not exhaust retries: attempts are spent by 5xx, drops and timeouts only.
      VQ_ATTEMPTS: '40',
      VQ_BACKOFF: '200ms',
      VQ_LOCK_DURATION: '2s',
      VQ_STALLED_INTERVAL: '1s',
      VQ_CONNECT_TIMEOUT: '1s',
      VQ_REQUEST_TIMEOUT: '1500ms',
      LOG_LEVEL: 'info',
    };
    // The producer's Config must match: attempts and backoff are job options set at enqueue time.
    const { PATH: _path, ...settings } = env;
    const config: Config = testConfig(prefix, settings);
    services = await openQueueServices(config);
    const s = services;
    s.queue.on('error', () => {}); // Redis restarts are expected here; commands are retried below

    // Input rows as a user would send them: valid plates, repeats in other spellings, non-plates.
    const inputs: string[] = [];
    valid.forEach((plate, i) => {
      inputs.push(plate);
      if (i % 50 === 7) inputs.push(`${plate.slice(0, 3).toLowerCase()}-${plate.slice(3)}`);
      if (i % 60 === 11) inputs.push(i % 120 === 11 ? 'NOPE' : `${plate.slice(0, 6)}`);
    });
    const batchId = `chaos-${SEED}`;
    await ingest(s, { id: batchId, source: 'library', name: 'chaos' }, rowsFromPlates(inputs));
    note(`ingested ${inputs.length} rows (${valid.length} distinct valid plates)`);

    // Redis may be restarting under any of these: ask again until it answers.
    async function retrying<T>(fn: () => Promise<T>, what: string, ms = 60_000): Promise<T> {
      const deadline = Date.now() + ms;
      for (;;) {
        try {
          return await fn();
        } catch (err) {
          if (Date.now() > deadline) throw new Error(`${what}: ${(err as Error).message}`);
          await sleep(200);
        }
      }
    }
    const batch = () => retrying(() => s.batches.get(batchId), 'batch state');
    const finished = async () => (await batch()).finishedAt !== undefined;

    // --- workers ------------------------------------------------------------------------------
    const workers: VqbProcess[] = [];
    const spawnWorker = (slot: number) => {
      workers[slot] = procs.spawn(`worker-${slot}`, ['work'], env);
    };
    for (let i = 0; i < WORKERS; i++) spawnWorker(i);

    // --- the schedule -------------------------------------------------------------------------
    const summary: Summary = {
      seed: SEED,
      size: FULL ? 'full' : 'CI',
      plates: valid.length,
      inputRows: inputs.length,
      kills: 0,
      redisRestarts: { SIGTERM: 0, SIGKILL: 0 },
      storms: {},
      simFaults: { errors: 0, drops: 0, dropsAfterCreate: 0 },
      keyRotations: 0,
      exportFailures: 0,
      possibleDuplicates: 0,
      duplicateCreates: 0,
      creates: 0,
      requests: 0,
      failed: 0,
      durationS: 0,
      chaosS: 0,
      timeline,
    };
    const plan: EventKind[] = shuffle(rng, [
      ...Array<EventKind>(SIZE.killEvents).fill('kill'),
      ...Array<EventKind>(SIZE.redisRestarts).fill('redis'),
      ...Array<EventKind>(SIZE.storms).fill('storm-5xx'),
      ...Array<EventKind>(SIZE.storms).fill('storm-drop'),
      ...Array<EventKind>(SIZE.storms).fill('storm-slow'),
      'key-rotation',
      'export-unwritable',
    ]);
    let currentKey = 0;

    const events: Record<EventKind, () => Promise<void>> = {
      async kill() {
        // Mostly one worker; sometimes two at once (their jobs must be taken over by the third).
        const slots = shuffle(rng, [0, 1, 2]).slice(0, rng() < 0.25 ? 2 : 1);
        for (const slot of slots) {
          const victim = workers[slot]!;
          await procs.kill(victim, 'SIGKILL');
          summary.kills++;
          note(`SIGKILL worker-${slot} (pid ${victim.output.pid})`);
        }
        await sleep(uniform(rng, 200, 1_500));
        for (const slot of slots) spawnWorker(slot);
      },
      async redis() {
        const signal = rng() < 0.5 ? 'SIGTERM' : 'SIGKILL';
        // Sometimes past VQ_LOCK_DURATION: live workers then lose their job locks while Redis is away.
        const down = uniform(rng, 300, 4_000);
        await redis!.stop(signal);
        await sleep(down);
        await redis!.start();
        summary.redisRestarts[signal]++;
        note(`Redis ${signal}, down ${Math.round(down)} ms, restarted from its AOF`);
      },
      async 'storm-5xx'() {
        await storm('5xx', { errorRate: 0.5 }, { errorRate: 0 });
      },
      async 'storm-drop'() {
        await storm('drop', { dropRate: 0.25, dropAfterCreateRate: 0.05 }, { dropRate: 0, dropAfterCreateRate: 0 });
      },
      async 'storm-slow'() {
        // Past VQ_REQUEST_TIMEOUT: some answers arrive after the client gave up (creates made upstream).
        await storm('slow', { latencyMs: [800, 2_500] }, { latencyMs: [0, 0] });
      },
      async 'key-rotation'() {
        const old = keys[currentKey]!;
        sim!.keys.expire(old);
        note('key expired upstream');
        const paused = await waitFor(async () => (await retrying(() => s.line.state(), 'line')).pause, 30_000);
        expect(paused?.code, 'an expired key pauses the line').toBe('EXPIRED_API_KEY');
        note(`line paused: ${paused!.code}`);
        await sleep(uniform(rng, 500, 2_000));
        currentKey = 1;
        sim!.keys.add({ key: keys[currentKey]! });
        // Written as an operator's tooling would: a new file renamed over the old one.
        await writeFile(`${keyFile}.new`, `${keys[currentKey]}\n`);
        await rename(`${keyFile}.new`, keyFile);
        const resumed = await procs.run('resume', ['resume'], env);
        expect(resumed.code, resumed.stderr).toBe(0);
        const state = await retrying(() => s.line.state(), 'line');
        expect(state.paused).toBe(false);
        summary.keyRotations++;
        note('new key written to VQ_API_KEY_FILE, `vqb resume` → line running');
      },
      async 'export-unwritable'() {
        // We run as root, so chmod would not stop a write: put a regular file where the directory was.
        const hadDir = await stat(outDir).then(
          (st) => st.isDirectory(),
          () => false,
        );
        if (hadDir) await rename(outDir, `${outDir}.away`);
        await writeFile(outDir, 'not a directory\n');
        const failed = await procs.run('export-unwritable', ['export', batchId], env);
        expect(failed.code, 'an export into a file that is not a directory fails').not.toBe(0);
        expect(failed.stdout).toBe('');
        // The first line says what failed and where (the whole message must be one line: see bad-input.test.ts).
        expect(failed.stderr.split('\n')[0]).toMatch(/^vqb: .*(EEXIST|ENOTDIR|not a directory)/i);
        expect(failed.stderr).toContain(outDir);
        expect(await readFile(outDir, 'utf8')).toBe('not a directory\n');
        summary.exportFailures++;
        note(`vqb export into an unusable out dir: exit ${failed.code}, "${failed.stderr.split('\n')[0]}"`);
        await sleep(uniform(rng, 300, 1_500));
        await rm(outDir);
        if (hadDir) await rename(`${outDir}.away`, outDir);
        const ok = await procs.run('export-restored', ['export', batchId], env);
        expect(ok.code, ok.stderr).toBe(0);
        expect(await readdir(outDir)).toEqual(expect.arrayContaining([`${batchId}.csv`, `${batchId}.jsonl`, `${batchId}.rejects.csv`]));
        note('out dir restored: vqb export succeeded (a running batch exports "pending" rows)');
      },
    };

    async function storm(kind: string, on: Parameters<SimulatorHandle['update']>[0], off: Parameters<SimulatorHandle['update']>[0]) {
      const ms = uniform(rng, 2_000, 4_000);
      sim!.update(on);
      note(`storm ${kind} ${JSON.stringify(on)} for ${Math.round(ms)} ms`);
      await sleep(ms);
      sim!.update(off);
      summary.storms[kind] = (summary.storms[kind] ?? 0) + 1;
    }

    // Let the pipeline fill before the first fault.
    await waitFor(async () => ((await batch()).counts.done >= 10 ? true : undefined), 60_000);
    // Spread the faults over about two thirds of the batch's expected length (≈ 2.2 requests a
    // plate at the configured rate), so the last third also runs on a line that was just hit.
    const expectedS = (valid.length * 2.2) / Number(SIZE.rate.split('/')[0]);
    const meanGapMs = Math.max(1_500, ((0.65 * expectedS) / plan.length - 1.5) * 1_000);
    let cutShort = false;
    for (const kind of plan) {
      await sleep(uniform(rng, 0.5 * meanGapMs, 1.5 * meanGapMs));
      if (await finished()) {
        cutShort = true;
        break;
      }
      await events[kind]();
    }
    summary.chaosS = Math.round((Date.now() - started) / 1000);
    expect(cutShort, `the batch finished before the schedule ran out (lower VQ_RATE_LIMIT); ${timeline.join('\n')}`).toBe(false);
    note('schedule done; waiting for the batch');

    // --- the batch finishes on its own ----------------------------------------------------------
    const deadline = started + SIZE.finishMs;
    while (!(await finished())) {
      if (Date.now() > deadline) {
        const info = await batch();
        const counts = await s.queue.getJobCounts();
        throw new Error(`batch not finished after ${SIZE.finishMs / 1000} s: ${JSON.stringify(info.counts)} queue ${JSON.stringify(counts)}\n${timeline.join('\n')}`);
      }
      await sleep(500);
    }
    note('batch finished');
    // The last outcomes land just before their jobs complete: give the queue a moment to settle.
    const busy = ['wait', 'prioritized', 'delayed', 'active', 'waiting-children'] as const;
    const settled = await waitFor(async () => {
      const counts = await s.queue.getJobCounts(...busy);
      return Object.values(counts).every((n) => n === 0) ? counts : undefined;
    }, 30_000).catch(() => undefined);
    const counts = await s.queue.getJobCounts(...busy, 'failed', 'completed');
    expect(settled, `jobs left unfinished: ${JSON.stringify(counts)}`).toBeDefined();
    for (const w of workers) await procs.kill(w, 'SIGTERM');
    for (const w of workers) expect((await w.exited).code, `worker ${w.output.pid} exits cleanly on SIGTERM`).toBe(0);
    expect(
      procs.unexpectedExits.map((o) => `${o.name} pid ${o.pid} exit ${o.code}: ${o.stderr.slice(-500)}`),
      'no vqb process died on its own',
    ).toEqual([]);

    // --- one outcome per valid plate, one create per plate unless flagged -----------------------
    const outcomes = new Map<string, Outcome>();
    for await (const o of s.outcomes.scan(batchId)) {
      expect(outcomes.has(o.plate), `two outcomes for ${o.plate}`).toBe(false);
      outcomes.set(o.plate, o);
    }
    expect([...outcomes.keys()].sort()).toEqual([...valid].sort());
    const info = await s.batches.get(batchId);
    const failedOutcomes = [...outcomes.values()].filter((o) => o.status === 'failed');
    expect(info.counts).toMatchObject({ enqueued: valid.length, done: valid.length - failedOutcomes.length, failed: failedOutcomes.length, inflight: 0 });
    // Storms, kills and restarts never cost a plate: only the plates that fail upstream failed.
    expect(failedOutcomes.map((o) => `${o.plate} ${o.error?.code}`).sort()).toEqual(failPlates.map((p) => `${p} VEHICLE_NOT_FOUND`).sort());

    const stats = sim.stats({ plates: true });
    const createsByPlate = stats.createsByPlate ?? {};
    const flagged = [...outcomes.values()].filter((o) => o.possibleDuplicate === true);
    const unflaggedRepeats: string[] = [];
    for (const plate of valid) {
      const n = createsByPlate[plate] ?? 0;
      expect(n, `plate ${plate} was never created upstream`).toBeGreaterThanOrEqual(1);
      if (n > 1 && outcomes.get(plate)?.possibleDuplicate !== true) unflaggedRepeats.push(`${plate}×${n}`);
    }
    expect(unflaggedRepeats, 'plates created more than once without a "possible duplicate" flag').toEqual([]);
    expect(info.counts.possibleDuplicates).toBe(flagged.length);
    for (const o of outcomes.values()) if (o.status === 'done') expect(o.queryId, o.plate).toBeTruthy();

    // Failed jobs only for plates whose outcome is failed.
    const failedJobs = await s.queue.getJobs(['failed'], 0, -1);
    for (const job of failedJobs) expect(outcomes.get(job!.data.plate)?.status, `failed job ${job!.id}`).toBe('failed');

    // --- the export rebuilt from Redis: one row per input row, matching the outcomes -------------
    const exported = await procs.run('export-final', ['export', batchId], env);
    expect(exported.code, exported.stderr).toBe(0);
    const jsonl = (await readFile(join(outDir, `${batchId}.jsonl`), 'utf8'))
      .trimEnd()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    const csv = parse(await readFile(join(outDir, `${batchId}.csv`)), { bom: true, delimiter: ';', columns: true }) as Record<string, string>[];
    expect(jsonl).toHaveLength(inputs.length);
    expect(csv).toHaveLength(inputs.length);
    const firstRowOf = new Map<string, number>();
    for (let i = 0; i < inputs.length; i++) {
      const row = jsonl[i]!;
      const line = csv[i]!;
      expect(row.row).toBe(i + 1);
      expect(row.input).toBe(inputs[i]);
      expect(line.row).toBe(String(i + 1));
      const plate = row.plate as string;
      const outcome = outcomes.get(plate);
      let status: string;
      if (!valid.includes(plate)) status = 'rejected';
      else if (firstRowOf.has(plate)) status = 'duplicate';
      else {
        firstRowOf.set(plate, i + 1);
        status = outcome!.status;
      }
      expect({ row: i + 1, status: row.status, csv: line.status }).toEqual({ row: i + 1, status, csv: status });
      if (status !== 'rejected') {
        expect(row.queryId, `row ${i + 1}`).toBe(outcome!.queryId);
        expect(line.query_id, `row ${i + 1}`).toBe(outcome!.queryId ?? '');
        expect(row.possibleDuplicate === true).toBe(outcome!.possibleDuplicate === true);
      }
    }

    // --- the key, old and new, appears nowhere ------------------------------------------------
    const needles = keys.flatMap(canaryNeedles);
    const leaks: Leak[] = [];
    for (const o of procs.outputs) leaks.push(...findIn(`${o.stdout}\n${o.stderr}`, needles, `output of ${o.name} (pid ${o.pid})`));
    const conn = new (await import('ioredis')).Redis(redis.url);
    try {
      const scanned = await scanRedis(conn, prefix, needles);
      expect(scanned.byType.stream, 'BullMQ event streams were scanned').toBeGreaterThan(0);
      expect(scanned.keys).toBeGreaterThan(5);
      leaks.push(...scanned.leaks);
    } finally {
      conn.disconnect();
    }
    const files = await scanDir(outDir, needles);
    expect(files.files).toBeGreaterThanOrEqual(3);
    leaks.push(...files.leaks);
    for (const o of failedOutcomes) leaks.push(...findIn(JSON.stringify(o.error), needles, `error of failed outcome ${o.plate}`));
    expect(procs.text().length, 'process output was captured').toBeGreaterThan(1_000);
    expect(leaks).toEqual([]);

    // --- summary ----------------------------------------------------------------------------------
    Object.assign(summary, {
      simFaults: stats.faults,
      possibleDuplicates: flagged.length,
      duplicateCreates: Object.values(createsByPlate).filter((n) => n > 1).length,
      creates: stats.creates,
      requests: stats.requests,
      failed: failedOutcomes.length,
      durationS: Math.round((Date.now() - started) / 1000),
    });
    expect(summary.kills).toBeGreaterThanOrEqual(SIZE.killEvents);
    console.log(
      [
        `chaos summary (seed ${summary.seed}, ${summary.size} size, ${summary.durationS} s, chaos for the first ${summary.chaosS} s)`,
        `  ${summary.plates} plates / ${summary.inputRows} input rows: ${summary.plates - summary.failed} done, ${summary.failed} failed (all planned FAILED plates)`,
        `  ${summary.kills} worker SIGKILLs; Redis restarts: ${summary.redisRestarts.SIGTERM} SIGTERM, ${summary.redisRestarts.SIGKILL} SIGKILL`,
        `  storms: ${JSON.stringify(summary.storms)}; simulator faults: ${summary.simFaults.errors} 5xx, ${summary.simFaults.drops} drops, ${summary.simFaults.dropsAfterCreate} drops after create`,
        `  key rotations: ${summary.keyRotations}; failed exports into an unusable dir: ${summary.exportFailures}`,
        `  possible duplicates flagged: ${summary.possibleDuplicates} (plates actually created twice: ${summary.duplicateCreates}); creates ${summary.creates}, requests ${summary.requests}`,
        '  timeline:',
        ...timeline.map((l) => `    ${l}`),
      ].join('\n'),
    );
  });
});

/** Polls fn until it returns something other than undefined. */
async function waitFor<T>(fn: () => Promise<T | undefined>, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await fn().catch(() => undefined);
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`waited ${timeoutMs} ms in vain`);
    await sleep(200);
  }
}

// Proof under failure. Two accounts (each its own upstream key and rate), normal and bulk batches
// split across them, small interactive batches submitted while the faults run, three `vqb work`
// processes, a dedicated Redis with AOF, and a seeded schedule of faults: workers SIGKILLed and
// restarted, Redis restarted (SIGTERM or SIGKILL), 5xx storms, dropped connections, slow answers,
// one account's key expiring and being rotated (the other account must keep creating meanwhile),
// and the export directory made unusable while `vqb export` runs. Afterwards every promise is
// checked from the outside: one outcome per plate, one create per plate unless flagged "possible
// duplicate", interactive batches done before the bulk work queued ahead of them, empty queues and
// scheduler lists on both accounts, exports that match the outcomes, and no key anywhere.
//
// Redis durability: AOF with `appendfsync always` writes and fsyncs every write before Redis
// replies, so a SIGKILLed Redis loses nothing it acknowledged (a SIGTERMed one loses nothing
// either way: it fsyncs on shutdown). With `everysec` a SIGKILL may lose up to about a second of
// acknowledged writes (a stored queryId, an outcome), which no application can make up for.
//
//   npm run build && npx vitest run --config test/chaos/vitest.config.ts        (CI size)
//   CHAOS_FULL=1 …   1,000 plates, ≥ 10 kills     CHAOS_SEED=n …   replay a schedule
//   CHAOS_LOG_DIR=dir …   keep what every vqb process wrote (one file each)
import { randomBytes, randomInt } from 'node:crypto';
import { mkdtemp, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'csv-parse/sync';
import { afterAll, describe, expect, it } from 'vitest';
import type { Config } from '../../src/config.js';
import { ingest, rowsFromPlates } from '../../src/producers/ingest.js';
import type { Outcome } from '../../src/queue/types.js';
import { openQueueServices, type QueueServices } from '../../src/services.js';
import { type SimulatorHandle, startSimulator } from '../../src/simulator/index.js';
import { testConfig } from '../helpers/config.js';
import { sleep } from '../helpers/engine.js';
import { type DedicatedRedis, startRedisServer } from '../helpers/redis-server.js';
import { canaryNeedles, findIn, type Leak, scanDir, scanRedis } from './leaks.js';
import { bulkBatches, type ChaosAccount, chaosAccounts, interactiveBatch, type PlannedBatch } from './plan.js';
import { ProcessLog, suiteEnv, type VqbProcess } from './procs.js';
import { mulberry32, shuffle, uniform } from './rng.js';

const FULL = process.env.CHAOS_FULL === '1';
const SEED = process.env.CHAOS_SEED ? Number(process.env.CHAOS_SEED) : randomInt(1, 2 ** 31);
// The two rates add up to what one account ran at before accounts, so a run takes as long.
const SIZE = FULL
  ? {
      plates: 1_000,
      killEvents: 10,
      redisRestarts: 3,
      storms: 2,
      interactive: 5,
      rates: ['7/s', '5/s'] as const,
      finishMs: 10 * 60_000,
    }
  : {
      plates: 300,
      killEvents: 4,
      redisRestarts: 2,
      storms: 1,
      interactive: 3,
      rates: ['6/s', '4/s'] as const,
      finishMs: 4 * 60_000,
    };
const WORKERS = 3;
/** An interactive batch must finish before every batch of its account with at least this many plates still waiting when it arrived. */
const AHEAD_MIN_WAITING = 30;

type EventKind =
  | 'kill'
  | 'redis'
  | 'storm-5xx'
  | 'storm-drop'
  | 'storm-slow'
  | 'key-rotation'
  | 'export-unwritable'
  | 'interactive';

interface Submitted {
  batch: PlannedBatch;
  at: number;
  /** Batches of the same account with many plates waiting when it arrived. */
  ahead: string[];
}

interface Summary {
  seed: number;
  size: string;
  plates: number;
  inputRows: number;
  batches: number;
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
  let sampling = false;

  afterAll(async () => {
    sampling = false;
    await procs.killAll();
    if (process.env.CHAOS_LOG_DIR) await procs.saveTo(process.env.CHAOS_LOG_DIR);
    await services?.close().catch(() => {});
    await sim?.close();
    await redis?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it(`${SIZE.plates} plates on two accounts, with interactive batches among the bulk ones, survive kills, Redis restarts, upstream storms, a key rotation and an unwritable export dir`, async () => {
    const started = Date.now();
    const rng = mulberry32(SEED);
    const at = () => `+${((Date.now() - started) / 1000).toFixed(1)}s`;
    const timeline: string[] = [];
    const note = (line: string) => timeline.push(`${at()} ${line}`);
    console.log(`chaos: seed ${SEED} (${FULL ? 'full' : 'CI'} size; replay with CHAOS_SEED=${SEED})`);

    // --- the line: dedicated Redis with AOF, the simulator, two accounts, the input ------------
    redis = await startRedisServer(['--appendonly', 'yes', '--appendfsync', 'always']);
    dir = await mkdtemp(join(tmpdir(), 'vqb-chaos-'));
    const outDir = join(dir, 'out');
    const accounts = chaosAccounts(SIZE.rates);
    const keyFileOf = (id: string) => join(dir!, `key-${id}`);
    for (const a of accounts) await writeFile(keyFileOf(a.id), `${a.keys[0]}\n`);
    const accountsFile = join(dir, 'accounts.json');
    await writeFile(
      accountsFile,
      JSON.stringify({ accounts: accounts.map((a) => ({ id: a.id, apiKeyFile: keyFileOf(a.id), rateLimit: a.rate })) }),
    );

    const bulk = bulkBatches(SEED, accounts, SIZE.plates);
    const valid = bulk.flatMap((b) => b.valid);
    const failPlates = valid.filter((_, i) => i % 97 === 13); // ~1 %: queries that end FAILED upstream
    // Each account's key has the account's own limit upstream (sliding window), as a real plan would.
    sim = await startSimulator(
      {
        completionMs: [300, 1_500],
        rateLimit: '1000/s',
        window: 'sliding',
        keys: accounts.map((a) => ({ key: a.keys[0], label: a.id, rateLimit: a.rate })),
        failPlates,
      },
      { random: mulberry32(SEED ^ 0x5eed) },
    );
    const prefix = `{vqbchaos-${randomBytes(3).toString('hex')}}`;
    const env = suiteEnv({ redisUrl: redis.url, prefix, baseUrl: sim.url, accountsFile, outDir });
    // The producer's Config must match: attempts and backoff are job options set when a plate is fed.
    const { PATH: _path, ...settings } = env;
    const config: Config = testConfig(prefix, settings);
    services = await openQueueServices(config);
    const s = services;
    for (const queue of s.accounts.queues()) queue.on('error', () => {}); // Redis restarts are expected here; commands are retried below

    const accountOfPlate = new Map<string, string>();
    for (const b of bulk) {
      for (const plate of b.valid) accountOfPlate.set(plate, b.account);
      await ingest(
        s,
        { id: b.id, source: 'library', name: b.id, account: b.account, priority: b.priority, weight: b.weight },
        rowsFromPlates(b.inputs),
      );
    }
    const submitted: Submitted[] = [];
    const all = () => [...bulk, ...submitted.map((i) => i.batch)];
    const inputRows = () => all().reduce((n, b) => n + b.inputs.length, 0);
    note(
      `ingested ${bulk.length} batches, ${inputRows()} rows (${valid.length} distinct valid plates): ${bulk.map((b) => `${b.account}/${b.priority}×${b.weight} ${b.valid.length}`).join(', ')}`,
    );

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
    const batchInfo = (id: string) => retrying(() => s.batchViews.get(id), `batch ${id}`);
    const allFinished = async () => {
      for (const b of all()) if ((await batchInfo(b.id)).finishedAt === undefined) return false;
      return true;
    };
    /** Plates of the account the simulator created, repeats included. */
    const createsOf = (accountId: string) => {
      let n = 0;
      for (const [plate, count] of Object.entries(sim!.stats({ plates: true }).createsByPlate ?? {}))
        if (accountOfPlate.get(plate) === accountId) n += count;
      return n;
    };

    // --- workers ------------------------------------------------------------------------------
    const workers: VqbProcess[] = [];
    const spawnWorker = (slot: number) => {
      workers[slot] = procs.spawn(`worker-${slot}`, ['work'], env);
    };
    for (let i = 0; i < WORKERS; i++) spawnWorker(i);
    note(`${WORKERS} workers started`);

    // 429s are not a failure here (the account holds and goes on), but when they come says why;
    // the requests each account made every 5 s show where a run spent its time.
    sampling = true;
    const ratesOf: Record<string, number[]> = Object.fromEntries(accounts.map((a) => [a.id, []]));
    const sampler = (async () => {
      const seen: Record<string, number> = {};
      const countedOf = (id: string) =>
        Object.entries(sim!.stats().byKey).reduce(
          (n, [label, k]) => n + (label.replace(/-rotated$/, '') === id ? k.counted : 0),
          0,
        );
      let last = Object.fromEntries(accounts.map((a) => [a.id, 0]));
      let lastAt = Date.now();
      while (sampling) {
        for (const [label, k] of Object.entries(sim!.stats().byKey)) {
          if (k.rateLimited > (seen[label] ?? 0)) note(`429 ×${k.rateLimited - (seen[label] ?? 0)} to ${label}`);
          seen[label] = k.rateLimited;
        }
        if (Date.now() - lastAt >= 5_000) {
          const now = Object.fromEntries(accounts.map((a) => [a.id, countedOf(a.id)]));
          for (const a of accounts) ratesOf[a.id]!.push((now[a.id]! - last[a.id]!) / ((Date.now() - lastAt) / 1000));
          last = now;
          lastAt = Date.now();
        }
        await sleep(250);
      }
    })();

    // --- the schedule -------------------------------------------------------------------------
    const summary: Summary = {
      seed: SEED,
      size: FULL ? 'full' : 'CI',
      plates: valid.length,
      inputRows: 0,
      batches: 0,
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
      ...Array<EventKind>(SIZE.interactive).fill('interactive'),
      'key-rotation',
      'export-unwritable',
    ]);
    // The rotation comes in the first half, while the other account still has plenty to create.
    const rotationAt = plan.indexOf('key-rotation');
    const half = Math.floor(plan.length / 2);
    if (rotationAt >= half) {
      const to = Math.floor(rng() * half);
      [plan[rotationAt], plan[to]] = [plan[to]!, plan[rotationAt]!];
    }
    const [rotated, other] = (rng() < 0.5 ? [accounts[0], accounts[1]] : [accounts[1], accounts[0]]) as [
      ChaosAccount,
      ChaosAccount,
    ];

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
      async interactive() {
        // A person waiting on a screen: 1 to 5 plates, submitted through the library while bulk work is queued.
        const batch = interactiveBatch(SEED, submitted.length, rng, accounts);
        await retrying(() => s.redis.ping(), 'Redis'); // ingest takes a lock: start it on a connection that answers
        const ahead: string[] = [];
        for (const b of bulk) {
          if (
            b.account === batch.account &&
            (await retrying(() => s.scheduler.waiting(b), 'waiting')) >= AHEAD_MIN_WAITING
          )
            ahead.push(b.id);
        }
        const entry: Submitted = { batch, at: Date.now(), ahead };
        for (const plate of batch.valid) accountOfPlate.set(plate, batch.account);
        submitted.push(entry);
        await retrying(
          () =>
            ingest(
              s,
              { id: batch.id, source: 'library', name: batch.id, account: batch.account, priority: 'interactive' },
              rowsFromPlates(batch.inputs),
            ),
          `ingest ${batch.id}`,
        );
        note(
          `interactive batch ${batch.id}: ${batch.valid.length} plate(s) on ${batch.account}, ahead of ${ahead.length} batch(es) with ≥ ${AHEAD_MIN_WAITING} plates waiting`,
        );
      },
      async 'key-rotation'() {
        const line = s.accounts.line(rotated.id);
        sim!.keys.expire(rotated.keys[0]);
        note(`${rotated.id}'s key expired upstream`);
        const paused = await waitFor(async () => (await line.state()).pause, 30_000, `${rotated.id} paused`);
        expect(paused.code, 'an expired key pauses its account').toBe('EXPIRED_API_KEY');
        expect(paused.message).toContain(`vqb resume --account ${rotated.id}`);
        note(`${rotated.id} paused: ${paused.code}`);

        // The other account runs on meanwhile: its line is not paused and it keeps creating.
        expect(
          (await retrying(() => s.accounts.line(other.id).state(), 'line')).paused,
          `${other.id} is not paused with ${rotated.id}`,
        ).toBe(false);
        const pausedAt = Date.now();
        const creates0 = createsOf(other.id);
        const counted0 = sim!.stats().byKey[other.id]?.counted ?? 0;
        const pending = await retrying(() => s.scheduler.pendingTotal(other.id), 'pending');
        await waitFor(
          async () => (createsOf(other.id) >= creates0 + 3 ? true : undefined),
          20_000,
          `${other.id} creating while ${rotated.id} is paused (${pending} plates waiting)`,
        );
        await sleep(uniform(rng, 0, 1_000));
        const created = createsOf(other.id) - creates0;
        const requests = (sim!.stats().byKey[other.id]?.counted ?? 0) - counted0;
        const seconds = (Date.now() - pausedAt) / 1000;
        expect(
          (await retrying(() => line.state(), 'line')).paused,
          `${rotated.id} stays paused until an operator resumes it`,
        ).toBe(true);
        note(
          `while ${rotated.id} was paused, ${other.id} made ${created} creates, ${requests} requests in ${seconds.toFixed(1)} s (${(requests / seconds).toFixed(1)}/s of ${other.rate})`,
        );

        sim!.keys.add({ key: rotated.keys[1], label: `${rotated.id}-rotated`, rateLimit: rotated.rate });
        // Written as an operator's tooling would: a new file renamed over the old one.
        const keyFile = keyFileOf(rotated.id);
        await writeFile(`${keyFile}.new`, `${rotated.keys[1]}\n`);
        await rename(`${keyFile}.new`, keyFile);
        const resumed = await procs.run('resume', ['resume', '--account', rotated.id], env);
        expect(resumed.code, resumed.stderr).toBe(0);
        const state = await retrying(() => line.state(), 'line');
        expect(state.paused).toBe(false);
        expect(state.pause).toBeUndefined();
        summary.keyRotations++;
        note(`new key written to ${rotated.id}'s apiKeyFile, \`vqb resume --account ${rotated.id}\` → running`);
      },
      async 'export-unwritable'() {
        const batchId = bulk[0]!.id;
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
        expect(await readdir(outDir)).toEqual(
          expect.arrayContaining([`${batchId}.csv`, `${batchId}.jsonl`, `${batchId}.rejects.csv`]),
        );
        note('out dir restored: vqb export succeeded (a running batch exports "pending" rows)');
      },
    };

    async function storm(
      kind: string,
      on: Parameters<SimulatorHandle['update']>[0],
      off: Parameters<SimulatorHandle['update']>[0],
    ) {
      const ms = uniform(rng, 2_000, 4_000);
      sim!.update(on);
      note(`storm ${kind} ${JSON.stringify(on)} for ${Math.round(ms)} ms`);
      await sleep(ms);
      sim!.update(off);
      summary.storms[kind] = (summary.storms[kind] ?? 0) + 1;
    }

    // Let the pipeline fill on both accounts before the first fault.
    for (const a of accounts) {
      const first = bulk.find((b) => b.account === a.id)!;
      await waitFor(
        async () => ((await batchInfo(first.id)).counts.done >= 5 ? true : undefined),
        60_000,
        `first plates of ${a.id} done`,
      );
    }
    // Spread the faults over about two thirds of the expected length (≈ 2.2 requests a plate at
    // the account's rate, the slower account), so the last third also runs on a line just hit.
    const expectedS = Math.max(
      ...accounts.map(
        (a) =>
          (bulk.filter((b) => b.account === a.id).reduce((n, b) => n + b.valid.length, 0) * 2.2) /
          Number(a.rate.split('/')[0]),
      ),
    );
    const meanGapMs = Math.max(1_500, ((0.65 * expectedS) / plan.length - 1.5) * 1_000);
    let cutShort = false;
    for (const kind of plan) {
      await sleep(uniform(rng, 0.5 * meanGapMs, 1.5 * meanGapMs));
      if (await allFinished()) {
        cutShort = true;
        break;
      }
      await events[kind]();
    }
    summary.chaosS = Math.round((Date.now() - started) / 1000);
    expect(
      cutShort,
      `the batches finished before the schedule ran out (lower the accounts' rates); ${timeline.join('\n')}`,
    ).toBe(false);
    note('schedule done; waiting for the batches');

    // --- the batches finish on their own --------------------------------------------------------
    const deadline = started + SIZE.finishMs;
    while (!(await allFinished())) {
      if (Date.now() > deadline) {
        const infos = await Promise.all(
          all().map(async (b) => `${b.id} ${JSON.stringify((await batchInfo(b.id)).counts)}`),
        );
        const counts = await Promise.all(
          s.accounts.all().map(async ({ id, queue: q }) => `${id} ${JSON.stringify(await q.getJobCounts())}`),
        );
        // CI keeps only what the test prints: each line's state and the workers' warnings and
        // worse (a pause, a hold, a lost lock) say why a queue stopped moving.
        const lines = await Promise.all(
          s.accounts.all().map(async ({ id }) => `${id} ${JSON.stringify(await s.accounts.line(id).state())}`),
        );
        const warnings = procs.outputs
          .filter((o) => o.name.startsWith('worker-'))
          .flatMap((o) =>
            o.stderr
              .split('\n')
              .filter((l) => /"level":(40|50|60)/.test(l))
              .map((l) => `${o.name}/${o.pid} ${l.slice(0, 400)}`),
          )
          .slice(-40);
        throw new Error(
          `batches not finished after ${SIZE.finishMs / 1000} s:\n${infos.join('\n')}\nqueues: ${counts.join('; ')}\nlines: ${lines.join('; ')}\n${timeline.join('\n')}\nworkers' last warnings:\n${warnings.join('\n')}`,
        );
      }
      await sleep(500);
    }
    note('every batch finished');
    sampling = false;
    await sampler;
    // The last outcomes land just before their jobs complete: give the queues a moment to settle.
    const busy = ['wait', 'paused', 'prioritized', 'delayed', 'active', 'waiting-children'] as const;
    const leftOver = async () => {
      const counts = await s.accounts.counts(...busy);
      const waiting = await Promise.all(
        accounts.map(async (a) => [a.id, await s.scheduler.pendingTotal(a.id)] as const),
      );
      return { counts, waiting: Object.fromEntries(waiting) };
    };
    const settled = await waitFor(
      async () => {
        const left = await leftOver();
        return [...Object.values(left.counts), ...Object.values(left.waiting)].every((n) => n === 0) ? left : undefined;
      },
      30_000,
      'queues settled',
    ).catch(() => undefined);
    expect(settled, `jobs or plates left unfinished: ${JSON.stringify(await leftOver())}`).toBeDefined();
    for (const state of await s.accounts.states())
      expect(state.paused, `account ${state.account} paused at the end`).toBe(false);
    for (const w of workers) await procs.kill(w, 'SIGTERM');
    for (const w of workers) expect((await w.exited).code, `worker ${w.output.pid} exits cleanly on SIGTERM`).toBe(0);
    expect(
      procs.unexpectedExits.map((o) => `${o.name} pid ${o.pid} exit ${o.code}: ${o.stderr.slice(-500)}`),
      'no vqb process died on its own',
    ).toEqual([]);

    // --- one outcome per valid plate, one create per plate unless flagged -----------------------
    const outcomesOf = new Map<string, Map<string, Outcome>>();
    const infoOf = new Map<string, Awaited<ReturnType<typeof s.batchViews.get>>>();
    const allOutcomes: Outcome[] = [];
    for (const b of all()) {
      const outcomes = new Map<string, Outcome>();
      for await (const o of s.outcomes.scan(await s.batches.ref(b.id))) {
        expect(outcomes.has(o.plate), `two outcomes for ${o.plate} in ${b.id}`).toBe(false);
        outcomes.set(o.plate, o);
      }
      expect([...outcomes.keys()].sort(), b.id).toEqual([...b.valid].sort());
      const info = await s.batchViews.get(b.id);
      const failed = [...outcomes.values()].filter((o) => o.status === 'failed').length;
      expect(info.counts, b.id).toMatchObject({
        enqueued: b.valid.length,
        done: b.valid.length - failed,
        failed,
        inflight: 0,
      });
      expect(info.counts.possibleDuplicates, b.id).toBe(
        [...outcomes.values()].filter((o) => o.possibleDuplicate === true).length,
      );
      expect({ account: info.account, priority: info.priority, weight: info.weight }, b.id).toEqual({
        account: b.account,
        priority: b.priority,
        weight: b.weight,
      });
      outcomesOf.set(b.id, outcomes);
      infoOf.set(b.id, info);
      allOutcomes.push(...outcomes.values());
    }
    const failedOutcomes = allOutcomes.filter((o) => o.status === 'failed');
    // Storms, kills, restarts and the key rotation never cost a plate: only the plates that fail upstream failed.
    expect(failedOutcomes.map((o) => `${o.plate} ${o.error?.code}`).sort()).toEqual(
      failPlates.map((p) => `${p} VEHICLE_NOT_FOUND`).sort(),
    );
    for (const o of allOutcomes) if (o.status === 'done') expect(o.queryId, o.plate).toBeTruthy();

    const stats = sim.stats({ plates: true });
    const createsByPlate = stats.createsByPlate ?? {};
    const flagged = allOutcomes.filter((o) => o.possibleDuplicate === true);
    const unflaggedRepeats: string[] = [];
    for (const o of allOutcomes) {
      const n = createsByPlate[o.plate] ?? 0;
      expect(n, `plate ${o.plate} was never created upstream`).toBeGreaterThanOrEqual(1);
      if (n > 1 && o.possibleDuplicate !== true) unflaggedRepeats.push(`${o.plate}×${n}`);
    }
    expect(unflaggedRepeats, 'plates created more than once without a "possible duplicate" flag').toEqual([]);
    expect(Object.keys(createsByPlate).sort(), 'nothing but the submitted plates was created').toEqual(
      allOutcomes.map((o) => o.plate).sort(),
    );

    // Failed jobs only for plates whose outcome is failed, each on its own account's queue.
    for (const { id: accountId, queue } of s.accounts.all()) {
      for (const job of await queue.getJobs(['failed'], 0, -1)) {
        expect(job!.data.account, `failed job ${job!.id}`).toBe(accountId);
        expect(outcomesOf.get(job!.data.batchId)?.get(job!.data.plate)?.status, `failed job ${job!.id}`).toBe('failed');
      }
    }

    // --- interactive batches: done before the bulk work queued ahead of them -----------------------
    const interactiveLines: string[] = [];
    const late: string[] = [];
    const since = (t: number | undefined, from: number) =>
      t === undefined ? '-' : `${((t - from) / 1000).toFixed(1)} s`;
    for (const { batch, at: submittedAt, ahead } of submitted) {
      const finishedAt = infoOf.get(batch.id)!.finishedAt!;
      for (const id of ahead) {
        const bulkFinished = infoOf.get(id)!.finishedAt!;
        if (finishedAt >= bulkFinished)
          late.push(
            `${batch.id} finished ${since(finishedAt, bulkFinished)} after ${id}, which had ≥ ${AHEAD_MIN_WAITING} plates waiting when it arrived`,
          );
      }
      const outcomes = [...outcomesOf.get(batch.id)!.values()];
      const createdBy = Math.max(...outcomes.map((o) => o.createdAt ?? Number.NaN));
      interactiveLines.push(
        `${batch.id} (${batch.account}, ${batch.valid.length} plate(s)): created within ${((createdBy - submittedAt) / 1000).toFixed(1)} s, done within ${((finishedAt - submittedAt) / 1000).toFixed(1)} s`,
        // Each plate from its submission: created, finished, its requests and attempts (where the time went).
        ...outcomes.map(
          (o) =>
            `  ${o.plate}: created ${since(o.createdAt, submittedAt)}, finished ${since(o.finishedAt, submittedAt)}, ${o.requests} requests, ${o.attempts} attempt(s)${o.possibleDuplicate ? ', possible duplicate' : ''}`,
        ),
      );
    }
    // On a miss, what each interactive plate did and the chaos around it (the summary below is not reached).
    expect(late, [...late, ...interactiveLines, 'timeline:', ...timeline].join('\n')).toEqual([]);
    expect(submitted).toHaveLength(SIZE.interactive);

    // --- the exports rebuilt from Redis: one row per input row, matching the outcomes -------------
    const exported = await Promise.all(all().map((b) => procs.run(`export-final ${b.id}`, ['export', b.id], env)));
    for (const e of exported) expect(e.code, e.stderr).toBe(0);
    for (const b of all()) await checkExport(b, outcomesOf.get(b.id)!);
    note(`${exported.length} exports rebuilt and checked`);

    async function checkExport(b: PlannedBatch, outcomes: Map<string, Outcome>) {
      const jsonl = (await readFile(join(outDir, `${b.id}.jsonl`), 'utf8'))
        .trimEnd()
        .split('\n')
        .map((l) => JSON.parse(l) as Record<string, unknown>);
      const csv = parse(await readFile(join(outDir, `${b.id}.csv`)), {
        bom: true,
        delimiter: ';',
        columns: true,
      }) as Record<string, string>[];
      expect(jsonl, b.id).toHaveLength(b.inputs.length);
      expect(csv, b.id).toHaveLength(b.inputs.length);
      const valid = new Set(b.valid);
      const seen = new Set<string>();
      for (let i = 0; i < b.inputs.length; i++) {
        const row = jsonl[i]!;
        const line = csv[i]!;
        expect(row.row).toBe(i + 1);
        expect(row.input).toBe(b.inputs[i]);
        expect(line.row).toBe(String(i + 1));
        const plate = row.plate as string;
        const outcome = outcomes.get(plate);
        let status: string;
        if (!valid.has(plate)) status = 'rejected';
        else if (seen.has(plate)) status = 'duplicate';
        else {
          seen.add(plate);
          status = outcome!.status;
        }
        expect({ batch: b.id, row: i + 1, status: row.status, csv: line.status }).toEqual({
          batch: b.id,
          row: i + 1,
          status,
          csv: status,
        });
        if (status !== 'rejected') {
          expect(row.queryId, `${b.id} row ${i + 1}`).toBe(outcome!.queryId);
          expect(line.query_id, `${b.id} row ${i + 1}`).toBe(outcome!.queryId ?? '');
          expect(row.possibleDuplicate === true).toBe(outcome!.possibleDuplicate === true);
        }
      }
    }

    // --- no key, first or rotated, of either account appears anywhere ----------------------------
    const needles = accounts.flatMap((a) => a.keys.flatMap(canaryNeedles));
    const leaks: Leak[] = [];
    for (const o of procs.outputs)
      leaks.push(...findIn(`${o.stdout}\n${o.stderr}`, needles, `output of ${o.name} (pid ${o.pid})`));
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
    expect(files.files).toBeGreaterThanOrEqual(3 * all().length);
    leaks.push(...files.leaks);
    for (const o of failedOutcomes)
      leaks.push(...findIn(JSON.stringify(o.error), needles, `error of failed outcome ${o.plate}`));
    expect(procs.text().length, 'process output was captured').toBeGreaterThan(1_000);
    expect(leaks).toEqual([]);

    // --- summary ----------------------------------------------------------------------------------
    Object.assign(summary, {
      plates: allOutcomes.length,
      inputRows: inputRows(),
      batches: all().length,
      simFaults: stats.faults,
      possibleDuplicates: flagged.length,
      duplicateCreates: Object.values(createsByPlate).filter((n) => n > 1).length,
      creates: stats.creates,
      requests: stats.requests,
      failed: failedOutcomes.length,
      durationS: Math.round((Date.now() - started) / 1000),
    });
    expect(summary.kills).toBeGreaterThanOrEqual(SIZE.killEvents);
    expect(summary.keyRotations).toBe(1);
    const perAccount = accounts.map((a) => {
      const keys = Object.entries(stats.byKey).filter(([label]) => label === a.id || label === `${a.id}-rotated`);
      const counted = keys.reduce((n, [, k]) => n + k.counted, 0);
      const limited = keys.reduce((n, [, k]) => n + k.rateLimited, 0);
      const plates = allOutcomes.filter((o) => accountOfPlate.get(o.plate) === a.id).length;
      return `${a.id} at ${a.rate}: ${plates} plates, ${createsOf(a.id)} creates, ${counted} counted requests, ${limited} 429s${a === rotated ? ' (key rotated)' : ''}`;
    });
    console.log(
      [
        `chaos summary (seed ${summary.seed}, ${summary.size} size, ${summary.durationS} s, chaos for the first ${summary.chaosS} s)`,
        `  ${summary.plates} plates / ${summary.inputRows} input rows in ${summary.batches} batches: ${summary.plates - summary.failed} done, ${summary.failed} failed (all planned FAILED plates)`,
        ...perAccount.map((l) => `  ${l}`),
        ...accounts.map(
          (a) => `    ${a.id} requests/s, every 5 s: ${ratesOf[a.id]!.map((r) => r.toFixed(1)).join(' ')}`,
        ),
        `  load average at the end: ${loadavg()
          .map((l) => l.toFixed(1))
          .join(' ')} on ${cpus().length} cores`,
        `  ${summary.kills} worker SIGKILLs; Redis restarts: ${summary.redisRestarts.SIGTERM} SIGTERM, ${summary.redisRestarts.SIGKILL} SIGKILL`,
        `  storms: ${JSON.stringify(summary.storms)}; simulator faults: ${summary.simFaults.errors} 5xx, ${summary.simFaults.drops} drops, ${summary.simFaults.dropsAfterCreate} drops after create`,
        `  key rotations: ${summary.keyRotations} (${rotated.id}); failed exports into an unusable dir: ${summary.exportFailures}`,
        `  possible duplicates flagged: ${summary.possibleDuplicates} (plates actually created twice: ${summary.duplicateCreates}); creates ${summary.creates}, requests ${summary.requests}`,
        '  interactive batches:',
        ...interactiveLines.map((l) => `    ${l}`),
        '  timeline:',
        ...timeline.map((l) => `    ${l}`),
      ].join('\n'),
    );
  });
});

/** Polls fn until it returns something other than undefined. */
async function waitFor<T>(fn: () => Promise<T | undefined>, timeoutMs: number, what: string): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await fn().catch(() => undefined);
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`waited ${timeoutMs} ms in vain for ${what}`);
    await sleep(200);
  }
}

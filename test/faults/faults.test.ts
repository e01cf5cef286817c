// The fault suite: the faults real deployments meet that are not crashes, while a 2-account batch
// runs on three `vqb work` processes: a worker paused (SIGSTOP) past its lock at random moments;
// Redis paused (SIGSTOP); one worker cut off from Redis (a TCP proxy we control: reset, then a
// blackholed link) while the upstream stays reachable; and an upstream that answers creates late,
// resets after reading the body, answers 502 with a gateway page, cuts a 201's body, truncates its
// JSON, answers a first poll 404, and sends Retry-After as an HTTP date. Afterwards, counted at the
// simulator: every plate exactly one outcome, one create per plate except flagged ones, every
// plate created twice flagged, and every log line JSON.
//
//   npm run test:faults                 CI size (~300 plates, ~3 min)
//   FAULTS_FULL=1 npm run test:faults   1,000 plates, more and longer pauses
//   FAULTS_SEED=n …                     replay a schedule      FAULTS_LOG_DIR=dir …  keep the logs
import { randomBytes, randomInt } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { ingest, rowsFromPlates } from '../../src/producers/ingest.js';
import { openQueueServices, type QueueServices } from '../../src/services.js';
import { type SimulatorHandle, startSimulator } from '../../src/simulator/index.js';
import { ProcessLog, suiteEnv, type VqbProcess } from '../chaos/procs.js';
import { mulberry32, uniform } from '../chaos/rng.js';
import { makePlates, sleep } from '../helpers/engine.js';
import { type DedicatedRedis, startRedisServer } from '../helpers/redis-server.js';
import { startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.js';

const FULL = process.env.FAULTS_FULL === '1';
const SEED = process.env.FAULTS_SEED ? Number(process.env.FAULTS_SEED) : randomInt(1, 2 ** 31);
const SIZE = FULL
  ? { plates: 1_000, workerPauses: 8, redisPauseMs: [30_000, 40_000] as const, cutOffs: 2, finishMs: 12 * 60_000 }
  : { plates: 300, workerPauses: 3, redisPauseMs: [20_000, 24_000] as const, cutOffs: 1, finishMs: 5 * 60_000 };
const LOCK_MS = 3_000;
const ACCOUNTS = [
  { id: 'frota', rate: '8/s', key: `sk-fault-frota-${randomBytes(6).toString('hex')}` },
  { id: 'seguros', rate: '6/s', key: `sk-fault-seguros-${randomBytes(6).toString('hex')}` },
] as const;

function notJson(text: string): string[] {
  return text
    .split('\n')
    .filter((l) => l.trim() !== '')
    .filter((line) => {
      try {
        JSON.parse(line);
        return false;
      } catch {
        return true;
      }
    });
}

describe.skipIf(process.env.VQB_FAULTS !== '1')('faults', () => {
  const procs = new ProcessLog();
  let redis: DedicatedRedis | undefined;
  let proxy: TcpProxy | undefined;
  let sim: SimulatorHandle | undefined;
  let services: QueueServices | undefined;
  let dir: string | undefined;
  let redisPid: number | undefined;

  afterAll(async () => {
    if (redisPid) process.kill(redisPid, 'SIGCONT');
    for (const p of procs.running) p.child.kill('SIGCONT');
    await procs.killAll();
    if (process.env.FAULTS_LOG_DIR) await procs.saveTo(process.env.FAULTS_LOG_DIR);
    await services?.close().catch(() => {});
    await proxy?.close();
    await sim?.close();
    await redis?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it(`${SIZE.plates} plates on two accounts and three workers, through paused workers, a paused Redis, a worker cut off from Redis and broken upstream answers`, async () => {
    const started = Date.now();
    const rng = mulberry32(SEED);
    const timeline: string[] = [];
    const note = (line: string) => timeline.push(`+${((Date.now() - started) / 1000).toFixed(1)}s ${line}`);
    console.log(`faults: seed ${SEED} (${FULL ? 'full' : 'CI'} size; replay with FAULTS_SEED=${SEED})`);

    redis = await startRedisServer(['--appendonly', 'yes', '--appendfsync', 'always']);
    const probe = new Redis(redis.url);
    redisPid = Number(/process_id:(\d+)/.exec(await probe.info('server'))?.[1]);
    probe.disconnect();
    proxy = await startTcpProxy(redis.port);
    dir = await mkdtemp(join(tmpdir(), 'vqb-faults-'));
    for (const a of ACCOUNTS) await writeFile(join(dir, `key-${a.id}`), `${a.key}\n`);
    const accountsFile = join(dir, 'accounts.json');
    await writeFile(
      accountsFile,
      JSON.stringify({
        accounts: ACCOUNTS.map((a) => ({ id: a.id, apiKeyFile: join(dir!, `key-${a.id}`), rateLimit: a.rate })),
      }),
    );
    sim = await startSimulator(
      {
        completionMs: [300, 1_200],
        rateLimit: '1000/s',
        window: 'sliding',
        keys: ACCOUNTS.map((a) => ({ key: a.key, label: a.id, rateLimit: a.rate })),
        // The upstream's broken answers, all through the run: each create fault follows a query that was made (and paid).
        slowCreateRate: 0.01,
        slowCreateMs: 4_000,
        dropAfterCreateRate: 0.01,
        gatewayErrorAfterCreateRate: 0.01,
        cutBodyAfterCreateRate: 0.01,
        truncatedBodyAfterCreateRate: 0.005,
        pollNotFoundOnceRate: 0.03,
        retryAfterFormat: 'date',
      },
      { random: mulberry32(SEED ^ 0x5eed) },
    );
    const prefix = `{vqbfaults-${randomBytes(3).toString('hex')}}`;
    const env = suiteEnv(
      { redisUrl: redis.url, prefix, baseUrl: sim.url, accountsFile, outDir: join(dir, 'out') },
      // Pauses of several seconds must not count as stalls that fail a job.
      { VQ_POLL_DEADLINE: '5m', VQ_LOCK_DURATION: `${LOCK_MS}ms`, VQ_MAX_STALLED: '1000' },
    );
    const config = loadConfig({}, { ...env, LOG_LEVEL: 'silent' });
    services = await openQueueServices(config);
    const plates = makePlates(SIZE.plates, 70_000);
    const split = Math.round(SIZE.plates * 0.55);
    await ingest(
      services,
      { id: 'faults-frota', source: 'library', name: 'frota', account: 'frota' },
      rowsFromPlates(plates.slice(0, split)),
    );
    await ingest(
      services,
      { id: 'faults-seguros', source: 'library', name: 'seguros', account: 'seguros' },
      rowsFromPlates(plates.slice(split)),
    );

    const workers: VqbProcess[] = [
      procs.spawn('work-1', ['work'], env),
      procs.spawn('work-2', ['work'], env),
      // The third reaches Redis through the proxy, so it alone can be cut off.
      procs.spawn('work-3-proxied', ['work'], { ...env, REDIS_URL: proxy.url }),
    ];
    const counts = { workerPauses: 0, redisPauses: 0, cutOffs: 0 };

    // The schedule: seeded, spread over the first minute or two of the run.
    const events: { at: number; run: () => Promise<void> }[] = [];
    for (let i = 0; i < SIZE.workerPauses; i++) {
      events.push({
        at: uniform(rng, 3_000, FULL ? 150_000 : 50_000),
        run: async () => {
          const w = workers[Math.floor(rng() * 2)]!;
          const ms = uniform(rng, LOCK_MS * 2, LOCK_MS * 4);
          note(`SIGSTOP ${w.output.name} for ${Math.round(ms)} ms`);
          w.child.kill('SIGSTOP');
          await sleep(ms);
          w.child.kill('SIGCONT');
          counts.workerPauses += 1;
        },
      });
    }
    events.push({
      at: uniform(rng, 10_000, 20_000),
      run: async () => {
        const ms = uniform(rng, SIZE.redisPauseMs[0], SIZE.redisPauseMs[1]);
        note(`SIGSTOP redis for ${Math.round(ms)} ms`);
        process.kill(redisPid!, 'SIGSTOP');
        await sleep(ms);
        process.kill(redisPid!, 'SIGCONT');
        counts.redisPauses += 1;
      },
    });
    for (let i = 0; i < SIZE.cutOffs; i++) {
      events.push({
        at: uniform(rng, 35_000, FULL ? 120_000 : 45_000),
        run: async () => {
          note('work-3 cut off from Redis: reset, then blackholed for 8 s');
          proxy!.set('cut');
          await sleep(1_000);
          proxy!.set('blackhole');
          await sleep(8_000);
          proxy!.set('pass');
          counts.cutOffs += 1;
        },
      });
    }
    await Promise.all(events.map(async (e) => sleep(e.at).then(e.run)));
    note('faults over');

    // --- the end: every plate has one outcome -------------------------------------------------
    const deadline = Date.now() + SIZE.finishMs;
    const batchIds = ['faults-frota', 'faults-seguros'];
    for (;;) {
      const infos = await Promise.all(batchIds.map((id) => services!.batchViews.get(id)));
      if (infos.every((i) => i.finishedAt !== undefined)) break;
      if (Date.now() > deadline)
        throw new Error(`not finished: ${JSON.stringify(infos.map((i) => i.counts))}\n${timeline.join('\n')}`);
      await sleep(500);
    }
    note('finished');
    for (const w of workers) await procs.kill(w, 'SIGTERM');

    const stats = sim.stats({ plates: true });
    let flagged = 0;
    const unflagged: string[] = [];
    const missing: string[] = [];
    for (const [batchId, list] of [
      ['faults-frota', plates.slice(0, split)],
      ['faults-seguros', plates.slice(split)],
    ] as const) {
      const outcomes = await services.outcomes.getMany(await services.batches.ref(batchId), list);
      list.forEach((plate, i) => {
        const o = outcomes[i];
        if (!o) missing.push(plate);
        if (o?.possibleDuplicate) flagged += 1;
        if ((stats.createsByPlate?.[plate] ?? 0) > 1 && !o?.possibleDuplicate) unflagged.push(plate);
      });
    }
    const infos = await Promise.all(batchIds.map((id) => services!.batchViews.get(id)));
    const sent = infos.reduce((a, i) => a + i.counts.createsSent, 0);
    const badLines = procs.outputs.flatMap((o) =>
      [...notJson(o.stdout), ...notJson(o.stderr)].map((l) => `${o.name}: ${l.slice(0, 200)}`),
    );
    const simFaults = Object.entries(stats.faults)
      .filter(([, n]) => n > 0)
      .map(([k, n]) => `${k} ${n}`)
      .join(', ');
    const injected =
      counts.workerPauses +
      counts.redisPauses +
      counts.cutOffs +
      Object.values(stats.faults).reduce((a, b) => a + b, 0);
    console.log(
      [
        `faults: ${injected} faults injected (${counts.workerPauses} worker pauses, ${counts.redisPauses} Redis pauses, ${counts.cutOffs} cut-offs; upstream: ${simFaults || 'none'})`,
        `faults: ${SIZE.plates} plates, ${stats.creates} creates, ${stats.duplicateCreates} plates created twice, ${flagged} flagged, ${unflagged.length} unflagged duplicates`,
        `faults: creates sent per vqb ${sent}, creates counted by the simulator ${stats.countedCreates}; in ${((Date.now() - started) / 1000).toFixed(0)} s`,
        ...timeline,
      ].join('\n'),
    );
    expect(missing).toEqual([]);
    expect(unflagged).toEqual([]);
    // Every plate was created at least once; a plate created more often is flagged (above).
    expect(Object.keys(stats.createsByPlate ?? {})).toHaveLength(SIZE.plates);
    expect(badLines).toEqual([]);
    expect(procs.unexpectedExits.map((o) => `${o.name} exited ${o.code ?? o.signal}`)).toEqual([]);
  });
});

// A worker whose Redis fills up mid-batch (issue 13): the outcomes it cannot store stay in memory
// and are stored once Redis has room again; nothing is dropped, no plate is created twice, the
// line's wait reason is redis_full meanwhile and the log says so once, not once per retry.
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Metrics } from '../../src/metrics.js';
import { ingest, rowsFromPlates } from '../../src/producers/ingest.js';
import type { Outcome } from '../../src/queue/types.js';
import { openQueueServices, type QueueServices } from '../../src/services.js';
import { type SimulatorHandle, startSimulator } from '../../src/simulator/index.js';
import { startWorker, type WorkerHandle } from '../../workers/worker.js';
import { testConfig } from '../helpers/config.js';
import { makePlates } from '../helpers/engine.js';
import { captureLogs } from '../helpers/logs.js';
import { waitFor } from '../helpers/process.js';
import { type DedicatedRedis, startRedisServer } from '../helpers/redis-server.js';

const KEY = 'test-key-0123456789abcdef';
const PLATES = 60;

let server: DedicatedRedis;
let sim: SimulatorHandle;
let admin: Redis;
let services: QueueServices | undefined;
let worker: WorkerHandle | undefined;

beforeAll(async () => {
  server = await startRedisServer(['--maxmemory-policy', 'noeviction']);
  admin = new Redis(server.url);
  sim = await startSimulator({ completionMs: [200, 400], rateLimit: '1000/s', keys: [{ key: KEY }] });
});

afterAll(async () => {
  await worker?.close();
  await services?.close();
  await admin?.quit();
  await sim?.close();
  await server?.close();
});

describe('a worker with a full Redis', () => {
  it('keeps the paid results until Redis has room, then stores each once', async () => {
    const config = testConfig('{vqbfullworker}', {
      REDIS_URL: server.url,
      VQ_BASE_URL: sim.url,
      VQ_API_KEY: KEY,
      VQ_RATE_LIMIT: '30/s',
    });
    services = await openQueueServices(config);
    const logs = captureLogs();
    const plates = makePlates(PLATES);
    await ingest(services, { id: 'full', source: 'library', name: 'full' }, rowsFromPlates(plates));
    const metrics = new Metrics({ accounts: config.accounts });
    worker = startWorker(config, { logger: logs.logger, metrics });
    await waitFor(
      async () => (await services!.batchViews.get('full')).counts.creates >= 10,
      30_000,
      'creates under way',
    );
    // Full: any write that may grow memory is refused from now on.
    await admin.config('SET', 'maxmemory', '1');
    await waitFor(async () => worker!.health.state === 'full', 30_000, 'the worker sees Redis full');
    expect(worker.health.waitReason).toBe('redis_full');
    // A paid result is waiting to be stored: the waits metric counts it under redis_full.
    const waited = async () =>
      Number(
        /^vqb_line_wait_seconds_total\{account="default",reason="redis_full"\} (\S+)$/m.exec(
          (await metrics.render()).body,
        )?.[1] ?? 0,
      );
    await waitFor(async () => (await waited()) >= 2, 60_000, 'outcomes waiting to be stored');
    const during = (await services.batchViews.get('full')).counts;
    await admin.config('SET', 'maxmemory', '0');
    await waitFor(
      async () => (await services!.batchViews.get('full')).finishedAt !== undefined,
      90_000,
      'batch finished',
    );

    const info = await services.batchViews.get('full');
    expect(info.counts).toMatchObject({ enqueued: PLATES, done: PLATES, failed: 0 });
    expect(during.done).toBeLessThan(PLATES);
    const outcomes: Outcome[] = [];
    for await (const o of services.outcomes.scan(await services.batches.ref('full'))) outcomes.push(o);
    expect(outcomes.map((o) => o.plate).sort()).toEqual([...plates].sort());
    const creates = sim.stats({ plates: true }).createsByPlate ?? {};
    expect(Object.entries(creates).filter(([, n]) => n !== 1)).toEqual([]);
    const full = logs.lines.filter((l) => /redis is full/.test(String(l.msg)));
    expect(full.length).toBeGreaterThanOrEqual(1);
    expect(full.length).toBeLessThanOrEqual(3);
  }, 180_000);
});

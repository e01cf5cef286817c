// Redis killed and restarted under `vqb serve --workers` with a batch running (issue 13). A
// redis-server of the test's own, with every write on disk before it is acknowledged
// (appendonly, appendfsync always), so SIGKILL loses nothing Redis said it stored. During the
// outage /metrics still answers with the process and upstream counters; every line serve writes
// is JSON, and the outage is a few lines (one per change of state), not one per retry. After the
// restart the batch finishes: every plate one outcome, one create each at the simulator.
import type { ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Outcome } from '../../src/queue/types.js';
import { openQueueServices } from '../../src/services.js';
import { type SimulatorHandle, startSimulator } from '../../src/simulator/index.js';
import { testConfig } from '../helpers/config.js';
import { makePlates, sleep } from '../helpers/engine.js';
import { freePort, spawnVqb, waitFor } from '../helpers/process.js';
import { type DedicatedRedis, startRedisServer } from '../helpers/redis-server.js';

const TOKEN = 'outage-test-token-0123456789';
const KEY = 'test-key-0123456789abcdef';
const PREFIX = '{vqboutage}';
const PLATES = 120;

let server: DedicatedRedis;
let sim: SimulatorHandle;
let child: ChildProcess | undefined;

beforeAll(async () => {
  server = await startRedisServer(['--appendonly', 'yes', '--appendfsync', 'always']);
  sim = await startSimulator({ completionMs: [300, 800], rateLimit: '1000/s', keys: [{ key: KEY }] });
});

afterAll(async () => {
  if (child && child.exitCode === null) child.kill('SIGKILL');
  await sim?.close();
  await server?.close();
});

describe('Redis killed and restarted under serve --workers', () => {
  it('keeps JSON logs, serves /metrics, and finishes the batch with nothing lost and nothing paid twice', async () => {
    const port = await freePort();
    const serve = spawnVqb(
      ['serve', '--workers', '--no-inbox'],
      {
        PATH: process.env.PATH ?? '',
        REDIS_URL: server.url,
        VQ_PREFIX: PREFIX,
        VQ_BASE_URL: sim.url,
        VQ_API_KEY: KEY,
        VQ_HTTP_PORT: String(port),
        VQ_API_TOKENS: TOKEN,
        VQ_RATE_LIMIT: '20/s',
        VQ_POLL_INITIAL: '300ms',
        VQ_POLL_INTERVAL: '200ms',
        LOG_LEVEL: 'info',
      },
      240_000,
    );
    child = serve.child;
    let output = '';
    child.stdout!.on('data', (c: Buffer) => (output += c.toString()));
    child.stderr!.on('data', (c: Buffer) => (output += c.toString()));
    const base = `http://127.0.0.1:${port}`;
    const auth = { authorization: `Bearer ${TOKEN}` };
    await waitFor(async () => (await fetch(`${base}/healthz`).catch(() => undefined))?.ok === true, 30_000, 'serve up');

    const plates = makePlates(PLATES);
    const posted = await fetch(`${base}/v1/batches`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ plates }),
    });
    expect(posted.status).toBe(202);
    const { batch } = (await posted.json()) as { batch: { id: string } };
    const finished = async () => {
      const view = (await (await fetch(`${base}/v1/batches/${batch.id}`, { headers: auth })).json()) as {
        counts?: { done: number; failed: number };
        finished?: boolean;
      };
      return view;
    };
    // Kill Redis with the batch well under way.
    await waitFor(async () => ((await finished()).counts?.done ?? 0) >= 20, 60_000, 'first plates done');
    await server.stop('SIGKILL');

    await waitFor(async () => output.includes('redis connection lost'), 20_000, 'the outage logged');
    const scrape = await fetch(`${base}/metrics`);
    expect(scrape.status).toBe(200);
    const text = await scrape.text();
    expect(text).toMatch(/^process_cpu_user_seconds_total \d/m);
    expect(text).toMatch(/^vqb_upstream_requests_total\{account="default",operation="create",status="201"\} [1-9]/m);
    // The line says why it waits.
    expect(text).toMatch(/^vqb_line_waiting\{account="default",reason="redis_down"\} 1$/m);
    // Long enough for the workers, feeder and BullMQ to retry many times.
    await sleep(4_000);
    await server.start();

    await waitFor(async () => (await finished()).finished === true, 120_000, 'batch finished after the restart');
    expect(await (await fetch(`${base}/metrics`)).text()).toMatch(
      /^vqb_line_waiting\{account="default",reason="redis_down"\} 0$/m,
    );
    child.kill('SIGTERM');
    const done = await serve.done;
    expect(done.code).toBe(0);

    const lines = output.split('\n').filter((l) => l.trim() !== '');
    const notJson = lines.filter((l) => {
      try {
        JSON.parse(l);
        return false;
      } catch {
        return true;
      }
    });
    expect(notJson.filter((l) => !l.startsWith('vqb serving on '))).toEqual([]);
    const logs = lines.filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as { msg?: string; redis?: string });
    const lost = logs.filter((l) => l.msg?.startsWith('redis connection lost'));
    const back = logs.filter((l) => l.msg === 'redis connection back');
    expect(lost.length).toBeGreaterThanOrEqual(1);
    expect(back.length).toBeGreaterThanOrEqual(1);
    // One line per change of state: a blip or two while the server comes back, never one per retry.
    expect(lost.length + back.length).toBeLessThanOrEqual(6);
    const errors = logs.filter(
      (l) => /ECONNREFUSED|Connection is closed/.test(JSON.stringify(l)) && l.redis === undefined,
    );
    expect(errors.length, JSON.stringify(errors.slice(0, 3))).toBeLessThanOrEqual(6);

    const services = await openQueueServices(testConfig(PREFIX, { REDIS_URL: server.url }));
    try {
      const info = await services.batchViews.get(batch.id);
      expect(info.counts).toMatchObject({ enqueued: PLATES, done: PLATES, failed: 0 });
      const outcomes: Outcome[] = [];
      for await (const o of services.outcomes.scan(await services.batches.ref(batch.id))) outcomes.push(o);
      expect(outcomes.map((o) => o.plate).sort()).toEqual([...plates].sort());
    } finally {
      await services.close();
    }
    const creates = sim.stats({ plates: true }).createsByPlate ?? {};
    expect(Object.keys(creates)).toHaveLength(PLATES);
    expect(Object.entries(creates).filter(([, n]) => n !== 1)).toEqual([]);
  }, 300_000);
});

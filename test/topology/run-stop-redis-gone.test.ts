// Issue 22, defect 11: `vqb run` stopped (SIGTERM) at the moment Redis went away never exited and
// printed raw multi-line `Error: connect ECONNREFUSED` blocks between its JSON lines. A stop ends
// within a bounded time whatever Redis does; paid results it could not store are said, with where
// they are; every log line stays JSON. A dedicated redis-server, killed; the simulator over HTTP.
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type SimulatorHandle, startSimulator } from '../../src/simulator/index.js';
import { makePlates } from '../helpers/engine.js';
import { spawnVqb, waitFor } from '../helpers/process.js';
import { type DedicatedRedis, startRedisServer } from '../helpers/redis-server.js';

const KEY = 'test-key-0123456789abcdef';
let server: DedicatedRedis;
let sim: SimulatorHandle;
let dir: string;

beforeAll(async () => {
  server = await startRedisServer();
  // Every create answers after 2 s: when Redis dies, answers to paid creates are still on the way.
  sim = await startSimulator({
    completionMs: [800, 1_500],
    rateLimit: '1000/s',
    keys: [{ key: KEY }],
    slowCreateRate: 1,
    slowCreateMs: 2_000,
  });
  dir = await mkdtemp(join(tmpdir(), 'vqb-stop-'));
});

afterAll(async () => {
  await sim?.close();
  await server?.close();
  await rm(dir, { recursive: true, force: true });
});

describe('vqb run stopped while Redis goes away (issue 22, 11)', () => {
  it('stops at its shutdown timeout, says what it could not store and where it is, every stderr line JSON', async () => {
    const file = join(dir, 'frota.csv');
    await writeFile(file, `placa\r\n${makePlates(60).join('\r\n')}\r\n`);
    const out = join(dir, 'out');
    const run = spawnVqb(
      ['run', file, '--shutdown-timeout', '5s'],
      {
        PATH: process.env.PATH ?? '',
        REDIS_URL: server.url,
        VQ_PREFIX: 'stop',
        VQ_BASE_URL: sim.url,
        VQ_API_KEY: KEY,
        VQ_OUT_DIR: out,
        VQ_RATE_LIMIT: '30/s',
        VQ_POLL_INITIAL: '300ms',
        VQ_POLL_INTERVAL: '200ms',
        LOG_LEVEL: 'info',
      },
      90_000,
    );
    let stdout = '';
    run.child.stdout!.on('data', (c: Buffer) => (stdout += c.toString()));
    // Under way: creates out, answers coming back.
    await waitFor(async () => sim.stats().creates >= 15, 30_000, 'creates sent');
    run.child.kill('SIGTERM');
    await server.stop('SIGKILL');
    const { code, stderr } = await run.done;

    expect(code).toBe(130);
    // Every line on stderr is one JSON log line (no raw error blocks).
    const lines = stderr.split('\n').filter((l) => l !== '');
    for (const line of lines) expect(() => JSON.parse(line), line).not.toThrow();
    // Bounded by its own shutdown timeout, not by the Redis that is gone: the process says its wait
    // for running requests ended at the 5 s it was given (what follows, closing its connections, is
    // bounded in code: closeWithin in commands/run.ts). A run that hung is this test's timeout.
    const stop = lines.map((l) => JSON.parse(l) as { msg: string; timeoutMs?: number; held?: number });
    expect(
      stop.find((l) => l.msg.startsWith('running requests did not finish in time')),
      stderr,
    ).toMatchObject({
      timeoutMs: 5_000,
      held: expect.any(Number),
    });
    // Paid answers that never reached Redis are on disk, and the run says where.
    const saved = /paid results not stored in Redis: (\S+)/.exec(`${stdout}\n${stderr}`)?.[1];
    expect(saved, stdout).toBeDefined();
    const rows = (await readFile(saved!, 'utf8'))
      .trimEnd()
      .split('\n')
      .map((row) => JSON.parse(row) as { kind: string; plate: string; queryId?: string });
    expect(rows.length).toBeGreaterThan(0);
    for (const row of rows) {
      expect(row.kind).toBe('queryId');
      expect(row.plate).toMatch(/^[A-Z]{3}\d[A-Z0-9]\d\d$/);
      expect(row.queryId).toBeTruthy();
    }
  }, 60_000);
});

// A full Redis mid-ingest (issue 13): a redis-server of the test's own with maxmemory 20 MB
// (noeviction) takes a 200,000-plate CSV through `vqb run`. The run stops with one line naming
// maxmemory and how to resume; every plate handed to the scheduler has its row and is counted
// (each chunk was one transaction); after raising maxmemory the same command resumes and the
// ingest ends with every row stored exactly once. No upstream request is made: the batch's
// create cap is 0, so its plates wait at the cap and the second run is stopped once ingested.

import { once } from 'node:events';
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkCsv } from '../../src/producers/csv.js';
import { batchIdFor } from '../../src/producers/ingest.js';
import { openQueueServices, type QueueServices } from '../../src/services.js';
import { testConfig } from '../helpers/config.js';
import { makePlates } from '../helpers/engine.js';
import { spawnVqb } from '../helpers/process.js';
import { type DedicatedRedis, startRedisServer } from '../helpers/redis-server.js';

const ROWS = 200_000;
const PREFIX = '{vqbfull}';

let server: DedicatedRedis;
let admin: Redis;
let dir: string;
let csv: string;

beforeAll(async () => {
  server = await startRedisServer(['--maxmemory', '20mb', '--maxmemory-policy', 'noeviction']);
  admin = new Redis(server.url);
  dir = await mkdtemp(join(tmpdir(), 'vqb-full-'));
  csv = join(dir, 'frota.csv');
  // A customer file with a name and an address per plate: about 150 bytes of Redis a row.
  const out = createWriteStream(csv);
  out.write('placa;cliente;endereco\n');
  const plates = makePlates(ROWS);
  for (let i = 0; i < ROWS; i += 10_000) {
    const chunk = plates
      .slice(i, i + 10_000)
      .map(
        (p, j) =>
          `${p};Cliente ${i + j} Transportes Ltda;Rua das Palmeiras ${i + j}, Sala ${j % 100}, Centro, Sao Paulo SP\n`,
      );
    if (!out.write(chunk.join(''))) await once(out, 'drain');
  }
  out.end();
  await once(out, 'finish');
}, 60_000);

afterAll(async () => {
  await admin?.quit();
  await server?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

function env(): Record<string, string> {
  return {
    PATH: process.env.PATH ?? '',
    REDIS_URL: server.url,
    VQ_PREFIX: PREFIX,
    // Never called: the batch's create cap is 0.
    VQ_BASE_URL: 'http://127.0.0.1:9',
    VQ_API_KEY: 'test-key-0123456789abcdef',
    VQ_OUT_DIR: join(dir, 'out'),
    LOG_LEVEL: 'warn',
  };
}

/** What Redis holds for the batch: every plate handed to the scheduler has its row and is counted. */
async function holdings(services: QueueServices, batchId: string) {
  const info = await services.batchViews.get(batchId);
  const rows: { row: number; plate: string; kind: string }[] = [];
  for await (const r of services.batches.rows(batchId)) rows.push(r);
  const waiting = await admin.lrange(services.keys.pending(info), 0, -1);
  const jobs = await services.accounts.queue('default').getJobs(['waiting', 'prioritized', 'delayed', 'active']);
  const ingested = Number(await admin.hget(services.keys.batch(info), 'ingestedRows'));
  return { info, rows, waiting, jobPlates: jobs.map((j) => j.data.plate), ingested };
}

describe('a full Redis during an ingest', () => {
  it('stops with one line naming maxmemory, leaves no orphan plate, and the same command resumes with every row once', async () => {
    const digest = await checkCsv(createReadStream(csv));
    const batchId = batchIdFor('frota.csv', digest);

    const first = await spawnVqb(['run', csv, '--max-creates', '0'], env(), 180_000).done;
    expect(first.code, first.stderr).toBe(1);
    const lines = first.stderr.trim().split('\n');
    expect(lines, first.stderr).toHaveLength(1);
    expect(lines[0]).toMatch(/^vqb: Redis is full .*maxmemory.*run the same command again/);
    expect(first.stderr).not.toMatch(/\n\s+at |ReplyError/);

    const services = await openQueueServices(testConfig(PREFIX, { REDIS_URL: server.url }));
    try {
      const before = await holdings(services, batchId);
      expect(before.info.sealed).toBe(false);
      expect(before.rows.length).toBeGreaterThan(0);
      expect(before.rows.length).toBeLessThan(ROWS);
      // Rows, counts and the ingest position moved together, and with them the plates.
      expect(before.info.counts.total).toBe(before.rows.length);
      expect(before.ingested).toBe(before.rows.length);
      const queuedRows = new Set(before.rows.filter((r) => r.kind === 'queued').map((r) => r.plate));
      expect(before.info.counts.enqueued).toBe(queuedRows.size);
      const handedOut = [...before.waiting, ...before.jobPlates];
      expect(handedOut.length).toBe(queuedRows.size);
      expect(handedOut.filter((p) => !queuedRows.has(p))).toEqual([]);

      await admin.config('SET', 'maxmemory', '400mb');
      const second = spawnVqb(['run', csv, '--max-creates', '0'], env(), 180_000);
      // Once ingested the batch waits at its create cap: stop the run there, as a user would.
      let seen = '';
      second.child.stdout!.on('data', (c: Buffer) => {
        seen += c.toString();
        if (/batch \S+: \d+ rows/.test(seen)) second.child.kill('SIGTERM');
      });
      const done = await second.done;
      expect(done.stdout, done.stderr).toMatch(new RegExp(`batch ${batchId}: ${ROWS} rows, ${ROWS} plates enqueued`));

      const after = await holdings(services, batchId);
      expect(after.info.sealed).toBe(true);
      expect(after.info.counts).toMatchObject({ total: ROWS, enqueued: ROWS, rejected: 0, duplicates: 0 });
      expect(after.ingested).toBe(ROWS);
      expect(after.rows.map((r) => r.row)).toEqual(Array.from({ length: ROWS }, (_, i) => i + 1));
      const handed = [...after.waiting, ...after.jobPlates];
      expect(handed.length).toBe(ROWS);
      expect(new Set(handed).size).toBe(ROWS);
    } finally {
      await services.close();
    }
  }, 400_000);
});

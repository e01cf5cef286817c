// Retention (issue 13): a finished batch older than VQ_RETAIN is archived (exports + manifest,
// read back and checked) and every Redis key of it deleted; its results still download, by the
// CLI and over HTTP, the same rows as before; a running batch is never pruned; delete is refused
// while a batch runs unless cancelled, and a cancel loses no paid result; a dry run changes
// nothing; an archive that cannot be written deletes nothing and says why. Real Redis, the
// simulator over HTTP, the clock injected (no 30-day sleep).
import { randomBytes } from 'node:crypto';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Config } from '../../src/config.js';
import { ingestList } from '../../src/producers/enqueue.js';
import type { RedisClient } from '../../src/redis/connection.js';
import { Retention } from '../../src/retention.js';
import { Secret } from '../../src/setting-values.js';
import { BatchArchive } from '../../src/sinks/archive.js';
import { batchExportSource } from '../../src/sinks/batch-source.js';
import { archiveFor } from '../../src/sinks/export.js';
import { type Harness, makePlates, useHarness } from '../helpers/engine.js';
import { apiCall, type CallOptions, expectError, listenApi } from '../helpers/http.js';
import { cli, harnessEnv, startVqb, waitFor } from '../helpers/process.js';
import { startReceiver } from '../helpers/webhook-receiver.js';
import { sheetValues } from '../helpers/xlsx.js';

const TOKEN = 'svc-token-retention-0123456789abcdef';
const DAY = 86_400_000;
const harness = useHarness('each');
let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'vqb-retention-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** Every key of the Redis database whose name holds `text` (SCAN, as an operator would look). */
async function keysNaming(redis: RedisClient, text: string): Promise<string[]> {
  const found: string[] = [];
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `*${text}*`, 'COUNT', 1000);
    cursor = next;
    found.push(...keys);
  } while (cursor !== '0');
  return found.sort();
}

async function serve(
  h: Harness,
  config: Config = h.config,
): Promise<{
  app: FastifyInstance;
  base: string;
  call(path: string, options?: CallOptions): ReturnType<typeof apiCall>;
}> {
  const { app, base } = await listenApi(h, config);
  return { app, base, call: (path, options) => apiCall(base, TOKEN, path, options) };
}

function settings(archiveDir: string, extra: Record<string, string> = {}): Record<string, string> {
  return {
    VQ_ARCHIVE_DIR: archiveDir,
    VQ_API_TOKENS: TOKEN,
    VQ_RATE_LIMIT: '100/s',
    VQ_POLL_INITIAL: '200ms',
    VQ_POLL_INTERVAL: '100ms',
    ...extra,
  };
}

/** A finished batch with done, failed, rejected and duplicate rows and an extra input column. */
async function finishedBatch(h: Harness, name: string): Promise<string> {
  const plates = makePlates(6).map((plate, i) => ({ plate, customer: `c${i}; "quoted", ünïcode` }));
  const rows = [
    ...plates,
    { plate: 'not a plate', customer: 'x' },
    { plate: plates[0]!.plate, customer: 'again' },
    { plate: 'FAL1A23', customer: '=cmd' },
  ];
  const { batch } = await ingestList(h.services, rows, { source: 'library', name });
  await h.services.feeder.feed('default');
  await h.waitForBatch(batch.id);
  return batch.id;
}

describe('retention', () => {
  it('archives and prunes a finished batch older than VQ_RETAIN; its results still download (CLI and HTTP, same rows); Redis holds no key of it; a running batch is never pruned', async () => {
    const archiveDir = join(dir, 'a1');
    const h = await harness.start({
      label: 'ret1',
      sim: { failPlates: ['FAL1A23'] },
      config: settings(archiveDir, { VQ_RETAIN: '30d' }),
    });
    const api = await serve(h);
    try {
      const id = await finishedBatch(h, 'old');
      // A running batch: its worker stopped, plates still waiting.
      await h.workers[0]!.close();
      await h.enqueue('still-running', makePlates(5, 100));

      const before = {
        jsonl: (await api.call(`/v1/batches/${id}/results?format=jsonl`)).text,
        csv: (await api.call(`/v1/batches/${id}/results?format=csv`)).text,
        view: (await api.call(`/v1/batches/${id}`)).json,
        xlsx: await sheetValues(
          Buffer.from(
            await (
              await fetch(`${api.base}/v1/batches/${id}/results?format=xlsx`, {
                headers: { authorization: `Bearer ${TOKEN}` },
              })
            ).arrayBuffer(),
          ),
        ),
      };
      expect(before.xlsx).toHaveLength(10);
      expect(before.jsonl.trim().split('\n')).toHaveLength(9);
      expect(before.view).toMatchObject({
        state: 'finished',
        counts: { total: 9, done: 6, failed: 1, rejected: 1, duplicates: 1 },
      });
      expect(await keysNaming(h.services.redis, id)).not.toEqual([]);
      expect((await cli(h, ['export', id])).code).toBe(0);
      const exported = Object.fromEntries(
        await Promise.all(
          ['csv', 'jsonl', 'rejects.csv'].map(async (ext) => [
            ext,
            await readFile(join(h.config.outDir, `${id}.${ext}`)),
          ]),
        ),
      );

      // 29 days after it finished: kept. 31 days: archived and deleted. Same sweep, clock injected.
      const finishedAt = (await h.services.batchViews.get(id)).finishedAt!;
      const at = (ms: number) =>
        new Retention(h.services, archiveFor(h.config), {
          retainMs: h.config.retention.retainMs,
          now: () => finishedAt + ms,
        });
      expect((await at(29 * DAY).sweep())?.archived).toEqual([]);
      const swept = await at(31 * DAY).sweep();
      expect(swept?.archived.map((a) => a.batchId)).toEqual([id]);
      expect(swept?.candidates.map((c) => c.batchId)).not.toContain('still-running');

      // Redis: no key names the batch (its hash, rows, outcomes, costs, budget, jobs…), nor lists it.
      expect(await keysNaming(h.services.redis, id)).toEqual([]);
      expect(await h.services.batches.exists(id)).toBe(false);
      expect((await h.services.batchViews.list(0, 100)).batches.map((b) => b.id)).toEqual(['still-running']);

      // The archive: the export files and a manifest naming their sha256 and rows.
      const folder = join(archiveDir, id);
      expect((await readdir(folder)).sort()).toEqual(
        [`${id}.csv`, `${id}.jsonl`, `${id}.rejects.csv`, 'manifest.json'].sort(),
      );
      const manifest = JSON.parse(await readFile(join(folder, 'manifest.json'), 'utf8'));
      expect(manifest).toMatchObject({
        format: 'vqb-batch-archive',
        version: 1,
        batchId: id,
        batch: { counts: { total: 9, done: 6, failed: 1 } },
      });
      expect(manifest.files.map((f: { kind: string; rows: number }) => [f.kind, f.rows]).sort()).toEqual([
        ['csv', 9],
        ['jsonl', 9],
        ['rejects', 1],
      ]);
      for (const ext of ['csv', 'jsonl', 'rejects.csv'])
        expect(await readFile(join(folder, `${id}.${ext}`))).toEqual(exported[ext]);

      // Still served: HTTP results (both formats) and the batch, from the archive.
      expect((await api.call(`/v1/batches/${id}/results?format=jsonl`)).text).toBe(before.jsonl);
      expect((await api.call(`/v1/batches/${id}/results?format=csv`)).text).toBe(before.csv);
      const xlsx = await fetch(`${api.base}/v1/batches/${id}/results?format=xlsx`, {
        headers: { authorization: `Bearer ${TOKEN}` },
      });
      expect(xlsx.status).toBe(200);
      expect(await sheetValues(Buffer.from(await xlsx.arrayBuffer()))).toEqual(before.xlsx);
      const view = await api.call(`/v1/batches/${id}`);
      expect(view.status).toBe(200);
      expect(view.json).toMatchObject({
        id,
        state: 'archived',
        finished: true,
        counts: before.view.counts,
        archivedAt: expect.any(String),
      });
      // The CLI: export rebuilds the same files from the archive; status answers from the manifest.
      await rm(h.config.outDir, { recursive: true, force: true });
      expect((await cli(h, ['export', id])).code).toBe(0);
      for (const ext of ['csv', 'jsonl', 'rejects.csv'])
        expect(await readFile(join(h.config.outDir, `${id}.${ext}`))).toEqual(exported[ext]);
      const status = await cli(h, ['status', id, '--json']);
      expect(JSON.parse(status.stdout)).toMatchObject({ id, state: 'archived', counts: { done: 6 } });

      // The same content again does not pay again: BATCH_ARCHIVED, nothing queued.
      const rows = (await api.call(`/v1/batches/${id}/results`)).text
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l));
      await expect(
        ingestList(
          h.services,
          rows.map((r) => ({ plate: r.input, ...r.input_columns })),
          { source: 'library', name: 'old' },
        ),
      ).rejects.toMatchObject({ code: 'BATCH_ARCHIVED' });
      expect(await h.services.batches.exists(id)).toBe(false);

      // The running batch: never pruned, at any age, by the sweep, prune or delete.
      const running = await keysNaming(h.services.redis, 'still-running');
      expect(running.length).toBeGreaterThan(0);
      expect((await at(10_000 * DAY).prune({ olderThanMs: 0 })).candidates).toEqual([]);
      expect((await cli(h, ['prune', '--older-than', '0s'])).code).toBe(0);
      expect(await keysNaming(h.services.redis, 'still-running')).toEqual(running);
      expect((await h.services.batchViews.get('still-running')).finishedAt).toBeUndefined();
    } finally {
      await api.app.close();
    }
  });

  it('delete is refused while the batch runs (409 BATCH_RUNNING); with cancel the unsent plates are dropped, created ones finish, and no paid result is lost', async () => {
    const archiveDir = join(dir, 'a2');
    const h = await harness.start({
      label: 'ret2',
      sim: { completionMs: [1_500, 2_000] },
      config: settings(archiveDir, { VQ_RATE_LIMIT: '10/s', VQ_POLL_INITIAL: '1s' }),
    });
    const api = await serve(h);
    try {
      const plates = makePlates(60, 200);
      await h.enqueue('to-cancel', plates);
      await waitFor(
        async () => (await h.services.batchViews.get('to-cancel')).counts.creates >= 3,
        20_000,
        'a few creates',
      );

      const refused = await api.call('/v1/batches/to-cancel', { method: 'DELETE' });
      expectError(refused, 409, 'BATCH_RUNNING');
      const cliRefused = await cli(h, ['delete', 'to-cancel']);
      expect(cliRefused.code).toBe(1);
      expect(cliRefused.stderr).toMatch(/still running.*--cancel/);
      expect(await h.services.batches.exists('to-cancel')).toBe(true);

      const cancelled = await api.call('/v1/batches/to-cancel?cancel=true', { method: 'DELETE' });
      // Queries take 1.5–2 s upstream and 60 plates need 6 s of creates: some are paid and running, most not yet sent.
      expect(cancelled.status).toBe(202);
      expect(cancelled.json).toMatchObject({
        state: 'cancelling',
        batchId: 'to-cancel',
        running: expect.any(Number),
        dropped: expect.any(Number),
      });
      const dropped: number = cancelled.json.dropped;
      expect(dropped).toBeGreaterThan(0);
      expect(cancelled.json.running).toBeGreaterThan(0);
      // The created plates run to the end; then the sweep archives the batch (its delete was asked), whatever its age.
      await h.waitForBatch('to-cancel', 30_000);
      const swept = await new Retention(h.services, archiveFor(h.config), { retainMs: 0 }).sweep();
      expect(swept?.archived.map((a) => a.batchId)).toEqual(['to-cancel']);
      expect(await keysNaming(h.services.redis, 'to-cancel')).toEqual([]);

      // Every query the upstream created (paid) has its result in the archive; only never-sent plates are CANCELLED.
      const rows = (await api.call('/v1/batches/to-cancel/results')).text
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l));
      expect(rows).toHaveLength(60);
      const done = rows.filter((r) => r.status === 'done');
      const cancelledRows = rows.filter((r) => r.error?.code === 'CANCELLED');
      expect(done.length + cancelledRows.length).toBe(60);
      expect(cancelledRows.length).toBe(dropped);
      expect(cancelledRows.every((r) => r.queryId === undefined && r.requests === 0)).toBe(true);
      expect(h.sim.stats().creates).toBe(done.length);
      expect(done.every((r) => typeof r.queryId === 'string' && r.result !== undefined)).toBe(true);
      expect((await api.call('/v1/batches/to-cancel')).json).toMatchObject({
        state: 'archived',
        counts: { done: done.length, failed: cancelledRows.length },
      });
    } finally {
      await api.app.close();
    }
  });

  it('prune --dry-run lists what it would archive and changes nothing; a scoped token cannot delete another account’s batch', async () => {
    const archiveDir = join(dir, 'a3');
    const h = await harness.start({ label: 'ret3', sim: { failPlates: ['FAL1A23'] }, config: settings(archiveDir) });
    const id = await finishedBatch(h, 'dry');
    // The worker's next feed finds the account idle and takes it out of the active set (an empty
    // set is no key): let it, so the snapshots see only what the dry run does.
    for (let i = 0; (await h.services.scheduler.activeAccounts()).length > 0; i++) {
      if (i > 100) throw new Error('the account never went idle');
      await new Promise((r) => setTimeout(r, 100));
    }
    // The first polls' samples reach the poll learner's hash up to 500 ms after the last one was
    // made (they are sent together): send them now, or they land between the two snapshots.
    await Promise.all(h.workers.map((w) => w.learner.flush()));
    const snapshot = async () => {
      const keys = await keysNaming(h.services.redis, h.config.prefix);
      return Promise.all(keys.map(async (k) => [k, await h.services.redis.type(k)]));
    };
    const before = await snapshot();
    const dry = await cli(h, ['prune', '--older-than', '0s', '--dry-run']);
    expect(dry.code).toBe(0);
    expect(dry.stdout).toContain(`would archive and delete ${id}: 9 rows, 7 plates, about `);
    const json = JSON.parse((await cli(h, ['prune', '--older-than', '0s', '--dry-run', '--json'])).stdout);
    expect(json).toMatchObject({
      dryRun: true,
      candidates: [{ batchId: id, rows: 9, bytes: expect.any(Number) }],
      archived: [],
    });
    expect(json.candidates[0].bytes).toBeGreaterThan(1_000);
    expect(await snapshot()).toEqual(before);
    expect(await readdir(archiveDir).catch(() => [])).toEqual([]);

    // A token scoped to another account: 404, as if the batch did not exist; nothing deleted.
    const scoped = {
      ...h.config,
      accounts: [
        ...h.config.accounts,
        {
          ...h.config.accounts[0]!,
          id: 'other',
          tokens: { kind: 'inline', secrets: [new Secret('svc-token-other-account-0123456789')] },
        },
      ],
    } as Config;
    const api = await serve(h, scoped);
    try {
      const answer = await api.call(`/v1/batches/${id}`, {
        method: 'DELETE',
        token: 'svc-token-other-account-0123456789',
      });
      expectError(answer, 404);
      expect(await h.services.batches.exists(id)).toBe(true);
      // The admin token may: archived, 200.
      const deleted = await api.call(`/v1/batches/${id}`, { method: 'DELETE' });
      expect(deleted.status).toBe(200);
      expect(deleted.json).toMatchObject({ state: 'archived', alreadyArchived: false, batchId: id });
      expect(await keysNaming(h.services.redis, id)).toEqual([]);
    } finally {
      await api.app.close();
    }
  });

  it('an archive that cannot be written or does not read back deletes nothing and says why', async () => {
    const blocker = join(dir, 'not-a-dir');
    await writeFile(blocker, 'a file where the archive folder should be');
    const h = await harness.start({ label: 'ret4', sim: { failPlates: ['FAL1A23'] }, config: settings(blocker) });
    const id = await finishedBatch(h, 'unwritable');
    // The batch's own keys: a job's lock is BullMQ's, and the last job may still hold it for a
    // moment after its outcome finished the batch (a CI run saw it there, then gone).
    const ownKeys = async () => (await keysNaming(h.services.redis, id)).filter((k) => !k.endsWith(':lock'));
    const keys = await ownKeys();

    const pruned = await cli(h, ['prune', '--older-than', '0s']);
    expect(pruned.code).toBe(1);
    expect(pruned.stdout).toMatch(
      new RegExp(
        `NOT pruned ${id} \\(ARCHIVE_FAILED\\): batch ${id} was not archived, nothing was deleted: cannot write .*not-a-dir: it is not a directory`,
      ),
    );
    const deleted = await cli(h, ['delete', id]);
    expect(deleted.code).toBe(1);
    expect(deleted.stderr).toMatch(/was not archived, nothing was deleted: .*not a directory \(set VQ_ARCHIVE_DIR\)/);
    const api = await serve(h);
    try {
      expectError(await api.call(`/v1/batches/${id}`, { method: 'DELETE' }), 500, 'ARCHIVE_FAILED');
    } finally {
      await api.app.close();
    }
    expect(await ownKeys()).toEqual(keys);

    // A file changed after it was written: verification fails, nothing deleted.
    const archiveDir = join(dir, 'a4');
    const archive = new BatchArchive({ dir: archiveDir, csvDelimiter: h.config.csvDelimiter });
    const info = await h.services.batchViews.get(id);
    const retention = new Retention(h.services, archive, { retainMs: 0 });
    await archive.write(await batchExportSource(h.services.batches, h.services.outcomes, id), info);
    await writeFile(join(archiveDir, id, `${id}.csv`), 'tampered');
    const expected = { rows: 9, outcomes: 7, rejected: 1 };
    await expect(archive.verify(id, expected)).rejects.toMatchObject({
      code: 'ARCHIVE_FAILED',
      message: expect.stringMatching(/does not read back as written/),
    });
    // An archive whose rows do not add up to what Redis counted is refused too.
    await archive.write(await batchExportSource(h.services.batches, h.services.outcomes, id), info);
    await expect(archive.verify(id, { ...expected, outcomes: 8 })).rejects.toMatchObject({
      message: expect.stringMatching(/has 7 outcomes, Redis holds 8/),
    });
    expect(await ownKeys()).toEqual(keys);
    // A prune that crashed part-way through forgetting (outcomes gone, the batch still listed): the
    // next one keeps the good archive rather than rewrite it from what is left, and finishes.
    const good = await readFile(join(archiveDir, id, `${id}.jsonl`), 'utf8');
    await h.services.outcomes.forget(await h.services.batches.ref(id));
    // Rewriting it from what is left fails verification (rows pending) and puts the good one back.
    await expect(
      archive.write(await batchExportSource(h.services.batches, h.services.outcomes, id), info, expected),
    ).rejects.toMatchObject({
      code: 'ARCHIVE_FAILED',
      message: expect.stringMatching(/rows are still pending/),
    });
    expect(await readFile(join(archiveDir, id, `${id}.jsonl`), 'utf8')).toBe(good);
    expect((await retention.archiveAndForget(id)).batchId).toBe(id);
    expect(await keysNaming(h.services.redis, id)).toEqual([]);
    expect(await readFile(join(archiveDir, id, `${id}.jsonl`), 'utf8')).toBe(good);
    expect(good.split('\n').filter((l) => l.includes('"status":"done"'))).toHaveLength(6);
  });

  it('`vqb work` sweeps on its own: a batch past VQ_RETAIN is archived and deleted, one process at a time (needs `npm run build`)', async () => {
    const archiveDir = join(dir, 'a5');
    const h = await harness.start({ label: 'ret5', sim: { failPlates: ['FAL1A23'] }, config: settings(archiveDir) });
    const id = await finishedBatch(h, 'swept');
    await h.workers[0]!.close();
    // Two sweeps at once: the lock lets one run, the other answers undefined.
    const retention = new Retention(h.services, archiveFor(h.config), { retainMs: 0 });
    const both = await Promise.all([retention.sweep(), retention.sweep()]);
    expect(both.filter((r) => r === undefined)).toHaveLength(1);

    // `vqb work` runs until it is stopped; its own sweep is what is shown.
    const worker = startVqb(['work'], harnessEnv(h, { VQ_RETAIN: '1s', VQ_ARCHIVE_DIR: archiveDir }));
    try {
      await waitFor(async () => !(await h.services.batches.exists(id)), 30_000, 'the sweep of vqb work');
      expect(JSON.parse(await readFile(join(archiveDir, id, 'manifest.json'), 'utf8'))).toMatchObject({
        batchId: id,
        batch: { counts: { total: 9 } },
      });
      expect(await keysNaming(h.services.redis, id)).toEqual([]);
    } finally {
      await worker.stop();
    }
  });

  it('a batch with a callbackUrl waits until its webhook is settled, then its delivery records go to the manifest and leave Redis', async () => {
    const secret = `whsec_${randomBytes(32).toString('base64')}`;
    let answering = 500;
    const rx = await startReceiver(secret, () => answering);
    const archiveDir = join(dir, 'a6');
    const h = await harness.start({
      label: 'ret6',
      config: settings(archiveDir, {
        VQ_WEBHOOK_SECRET: secret,
        VQ_WEBHOOK_ALLOW: '127.0.0.1',
        VQ_WEBHOOK_BACKOFF: '200ms',
        VQ_WEBHOOK_ATTEMPTS: '20',
        VQ_WEBHOOK_TIMEOUT: '1s',
      }),
    });
    const api = await serve(h);
    try {
      const { batch } = await ingestList(h.services, makePlates(3, 300), {
        source: 'library',
        name: 'hooked',
        callbackUrl: rx.url,
      });
      await h.waitForBatch(batch.id);
      await rx.waitFor(1);
      // The receiver answers 500: the delivery is retrying, so the batch is not pruned yet.
      const retention = new Retention(h.services, archiveFor(h.config), { retainMs: 0 });
      expect((await retention.prune({ olderThanMs: 0 })).candidates).toEqual([]);
      await expect(retention.archiveAndForget(batch.id)).rejects.toMatchObject({
        code: 'BATCH_RUNNING',
        message: expect.stringMatching(/webhook/),
      });
      answering = 204;
      await waitFor(
        async () => (await h.services.webhooks.deliveries.list(batch.id)).every((d) => d.state === 'delivered'),
        30_000,
        'the webhook delivered',
      );

      expect((await retention.prune({ olderThanMs: 0 })).archived.map((a) => a.batchId)).toEqual([batch.id]);
      expect(await keysNaming(h.services.redis, batch.id)).toEqual([]);
      const view = await api.call(`/v1/batches/${batch.id}`);
      expect(view.json).toMatchObject({
        state: 'archived',
        callbackUrl: rx.url,
        webhooks: [{ event: 'batch.finished', state: 'delivered' }],
      });
    } finally {
      await api.app.close();
      await rx.close();
    }
  });
});

// Deadlines end to end (docs/plans.md): real Redis, the simulator over HTTP, in-process workers.
// A deadline is read or refused with a typed error; the enqueue says on a line of its own whether
// it can be met; `requireDeadline` refuses an infeasible batch before anything is paid (counted at
// the simulator); batches with deadlines finish in time where weights alone would miss one; a
// batch whose projected finish passes its deadline is told once as `batch.at_risk`, and
// `batch.back_on_track` once it is in time again.
import { randomBytes } from 'node:crypto';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { InputError, isError, type VqbError } from '../../src/errors.js';
import { Batch } from '../../src/index.js';
import { watchDeadlines } from '../../src/plans/watch.js';
import { estimate, ingestList } from '../../src/producers/enqueue.js';
import { createInboxWatcher } from '../../src/producers/inbox.js';
import { connectRedis } from '../../src/redis/connection.js';
import { createHttpApi } from '../../src/server.js';
import { openQueueServices } from '../../src/services.js';
import { parseRateLimit } from '../../src/setting-values.js';
import { startWebhookWorker } from '../../workers/webhooks.js';
import { makePlates, sleep, useHarness } from '../helpers/engine.js';
import { apiCall, expectError } from '../helpers/http.js';
import { type Receiver, startReceiver } from '../helpers/webhook-receiver.js';

const SECRET = `whsec_${randomBytes(32).toString('base64')}`;
const TOKEN = 'svc-token-0123456789-deadlines';
const harness = useHarness();
const closing: { close(): Promise<unknown> }[] = [];
afterEach(async () => {
  await Promise.all(closing.splice(0).map((c) => c.close()));
});

/** A known rate (configured) and a short answer time, so the judgement has figures from the start. */
const KNOWN = { VQ_RATE_LIMIT: '20/s', VQ_POLL_INITIAL: '500ms' };

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => {
      throw new Error('expected a refusal');
    },
    (err: unknown) => err,
  );
}

describe('deadlines: read, judged, refused', () => {
  it('a deadline that cannot be read, or has passed, is BAD_DEADLINE before anything is stored', async () => {
    const h = await harness.start({ label: 'dl-bad', config: KNOWN, workers: 0 });
    for (const deadline of ['soon', '25:00', '90', '2020-01-01T00:00:00Z', '0m', 1_000]) {
      const err = await rejection(ingestList(h.services, makePlates(3), { source: 'library', deadline }));
      expect(isError(err, InputError), String(deadline)).toBe(true);
      expect((err as VqbError).code).toBe('BAD_DEADLINE');
    }
    expect((await h.services.batchViews.list()).total).toBe(0);
  });

  it('the dry run and the enqueue say feasible / not feasible on a line of their own, with the ETA range and the work ahead', async () => {
    const h = await harness.start({ label: 'dl-lines', config: KNOWN, workers: 0 });
    const easy = await estimate(h.services, { source: 'library', plates: makePlates(20) }, { deadline: '1h' });
    expect(easy.deadline?.feasibility).toBe('feasible');
    expect(easy.deadline?.line).toMatch(/^deadline: feasible — due .+; finishes in .+–.+ \(on time by .+\)$/);
    expect(Date.parse(easy.deadline!.eta!.from)).toBeLessThan(Date.parse(easy.deadline!.eta!.to));
    // 2,000 plates at 20 requests a second need minutes, not 30 s.
    const hard = await estimate(h.services, { source: 'library', plates: makePlates(2_000) }, { deadline: '30s' });
    expect(hard.deadline?.feasibility).toBe('not feasible');
    expect(hard.deadline?.line).toMatch(/^deadline: not feasible — .+ \(late by .+\)$/);
    // Accepted with a warning (no requireDeadline): stored, and the plates of a batch due earlier count as ahead.
    const first = await ingestList(h.services, makePlates(200), { source: 'library', name: 'a', deadline: '10m' });
    expect(first.deadline?.feasibility).toBe('feasible');
    const late = await ingestList(h.services, makePlates(50, 500), { source: 'library', name: 'b', deadline: '2h' });
    expect(late.deadline?.aheadPlates).toBeGreaterThan(150);
    const view = await new Batch(late.batch.id, h.services).progress();
    expect(view.deadline).toMatchObject({ feasibility: 'feasible', atRisk: false });
  });

  it('unknown while no rate is known (an `auto` key before first contact), saying what would make it known', async () => {
    const h = await harness.start({ label: 'dl-unknown', config: { VQ_RATE_LIMIT: 'auto' }, workers: 0 });
    const e = await estimate(h.services, { source: 'library', plates: makePlates(10) }, { deadline: '2h' });
    expect(e.deadline?.feasibility).toBe('unknown');
    expect(e.deadline?.line).toMatch(/^deadline: unknown — .+first contact.+vqb check/);
    expect(e.deadline?.eta).toBeUndefined();
  });

  it('requireDeadline refuses an infeasible batch (DEADLINE_NOT_FEASIBLE; the API: 422) and nothing reaches the upstream', async () => {
    const h = await harness.start({ label: 'dl-require', config: { ...KNOWN, VQ_API_TOKENS: TOKEN } });
    const err = await rejection(
      ingestList(h.services, makePlates(2_000), { source: 'library', deadline: '30s', requireDeadline: true }),
    );
    expect((err as VqbError).code).toBe('DEADLINE_NOT_FEASIBLE');
    expect((err as Error).message).toMatch(/^deadline: not feasible — .+nothing was stored or sent$/);
    const app: FastifyInstance = await createHttpApi({
      services: h.services,
      config: h.config,
      logger: h.logs.logger,
      dashboard: false,
    });
    closing.push(app);
    await app.listen({ host: '127.0.0.1', port: 0 });
    const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
    const refused = await apiCall(base, TOKEN, '/v1/batches', {
      json: { plates: makePlates(2_000), deadline: '30s', requireDeadline: true },
    });
    expectError(refused, 422, 'DEADLINE_NOT_FEASIBLE');
    const bad = await apiCall(base, TOKEN, '/v1/batches', { json: { plates: makePlates(2), deadline: 'someday' } });
    expectError(bad, 400, 'BAD_DEADLINE');
    // The workers ran all along: nothing was stored, so nothing was sent.
    await sleep(1_000);
    expect((await h.services.batchViews.list()).total).toBe(0);
    expect(h.sim.stats().creates).toBe(0);
  });
});

describe('deadlines: the drop folder', () => {
  it("a sidecar <file>.json gives the dropped file's batch its deadline; one that cannot be used fails the file", async () => {
    const root = await mkdtemp(join(tmpdir(), 'vqb-deadline-inbox-'));
    closing.push({ close: () => rm(root, { recursive: true, force: true }) });
    const h = await harness.start({
      label: 'dl-inbox',
      config: { ...KNOWN, VQ_ROOT: root, VQ_INBOX_STABLE: '100ms', VQ_INBOX_POLL: '100ms' },
      workers: 0,
    });
    const watcher = createInboxWatcher({ services: h.services, config: h.config, logger: h.logs.logger });
    closing.push({ close: () => watcher.stop() });
    await watcher.scanOnce(); // makes the folders
    const inbox = join(root, 'inbox');
    const rows = (plates: string[]) => `placa\r\n${plates.join('\r\n')}\r\n`;
    await writeFile(join(inbox, 'frota.csv.json'), JSON.stringify({ deadline: '2h' }));
    await writeFile(join(inbox, 'frota.csv'), rows(makePlates(5)));
    await writeFile(join(inbox, 'bad.csv.json'), '{"deadline": "someday"}');
    await writeFile(join(inbox, 'bad.csv'), rows(makePlates(5, 100)));
    await writeFile(join(inbox, 'typo.csv.json'), '{"dedline": "2h"}');
    await writeFile(join(inbox, 'typo.csv'), rows(makePlates(5, 200)));
    for (let i = 0; i < 30 && (await readdir(inbox)).some((n) => !n.endsWith('.json')); i++) {
      await sleep(150);
      await watcher.scanOnce();
    }
    const { batches } = await h.services.batchViews.list();
    expect(batches.map((b) => b.name)).toEqual(['frota.csv']);
    const due = batches[0]!.deadline!;
    expect(Math.abs(due - (Date.now() + 2 * 3_600_000))).toBeLessThan(60_000);
    // A taken file's sidecar goes with it (a deadline that cannot be read fails the file when queued);
    // a sidecar that cannot be read at all fails its file at the take and stays.
    expect((await readdir(inbox)).sort()).toEqual(['typo.csv.json']);
    const failed = await readdir(join(root, 'failed'));
    const reasons = await Promise.all(
      failed.filter((n) => !n.endsWith('.csv')).map((n) => readFile(join(root, 'failed', n), 'utf8')),
    );
    expect(reasons.join('\n')).toMatch(/BAD_DEADLINE/);
    expect(reasons.join('\n')).toMatch(/INBOX_BAD_SIDECAR/);
  });
});

describe('deadlines: scheduling', () => {
  it('two batches with deadlines go before a larger batch without one, earliest deadline first, where equal weights would make the first late', async () => {
    // 40 requests a second, about 2 a plate: 20 plates a second. Shared three ways by weight, the
    // first (80 plates) would get about 6.7 a second, 12 s: past its 9 s.
    const h = await harness.start({
      label: 'dl-edf',
      config: { VQ_RATE_LIMIT: '40/s', VQ_POLL_INITIAL: '400ms', VQ_CONCURRENCY: '16' },
      sim: { completionMs: [100, 300] },
    });
    const filler = await ingestList(h.services, makePlates(300, 5_000), { source: 'library', name: 'filler' });
    const start = Date.now();
    const a = await ingestList(h.services, makePlates(80), { source: 'library', name: 'a', deadline: '9s' });
    const b = await ingestList(h.services, makePlates(120, 1_000), { source: 'library', name: 'b', deadline: '18s' });
    expect(a.deadline?.feasibility).toBe('feasible');
    expect(b.deadline?.feasibility).toBe('feasible');
    await h.waitForBatch(a.batch.id, 40_000);
    await h.waitForBatch(b.batch.id, 40_000);
    const [doneA, doneB] = [await h.services.batchViews.get(a.batch.id), await h.services.batchViews.get(b.batch.id)];
    // The batch without a deadline was not starved: it went on meanwhile and finishes.
    await h.waitForBatch(filler.batch.id, 40_000);
    const creates: { batch: string; at: number; finished: number }[] = [];
    for (const [name, id] of [
      ['a', a.batch.id],
      ['b', b.batch.id],
      ['filler', filler.batch.id],
    ] as const)
      for await (const o of h.services.outcomes.scan({ id, account: 'default' }))
        creates.push({ batch: name, at: o.createdAt!, finished: o.finishedAt! });
    creates.sort((x, y) => x.at - y.at);
    const lastA = creates.findLastIndex((c) => c.batch === 'a');
    const lastB = creates.findLastIndex((c) => c.batch === 'b');
    const upto = (i: number, batch: string) => creates.slice(0, i + 1).filter((c) => c.batch === batch).length;
    console.log(
      `deadlines: A done after ${doneA.finishedAt! - start} ms (9 s), B ${doneB.finishedAt! - start} ms (18 s); ` +
        `creates before A's last: B ${upto(lastA, 'b')}, filler ${upto(lastA, 'filler')}; before B's last: filler ${upto(lastB, 'filler')}`,
    );
    // The order of picks (whether each batch beat its deadline on the wall clock is a time, and
    // read 4.8 s and 13.0 s here): A, the earliest deadline, went before the weights (by weight, B
    // and the filler would each have had about 80 creates before A's last, 159 in all; read 1
    // alone and 14 in a CI run with five test files at once: creates fed to the queue before a
    // feed saw A urgent go first), then B before the filler (by weight, the filler about as many
    // as B's 120 before B's last; read 29-40).
    expect(upto(lastA, 'b') + upto(lastA, 'filler')).toBeLessThanOrEqual(40);
    expect(upto(lastB, 'filler')).toBeLessThanOrEqual(60);
    // A's answers were read as they came, not after the others' creates: its last plate finished
    // before B's last create went. (Its polls once yielded to every create that came after them,
    // its batch's creates closing when they joined the worker's line: 36 of them waited 21 s, until
    // B's and the filler's creates ran out, and A finished at 24 s against its 9 s.)
    const finishedA = Math.max(...creates.filter((c) => c.batch === 'a').map((c) => c.finished));
    expect(finishedA).toBeLessThan(creates[lastB]!.at);
    expect(h.sim.stats().rateLimited).toBe(0);
  });
});

describe('deadlines: at risk', () => {
  it('a batch accepted with a deadline it cannot meet is flagged at risk and batch.at_risk is sent once', async () => {
    const rx: Receiver = await startReceiver(SECRET);
    closing.push(rx);
    const h = await harness.start({
      label: 'dl-risk',
      config: {
        ...KNOWN,
        VQ_RATE_LIMIT: '10/s',
        VQ_WEBHOOK_SECRET: SECRET,
        VQ_WEBHOOK_ALLOW: '127.0.0.1',
        VQ_WEBHOOK_BACKOFF: '50ms',
      },
      workers: 2,
    });
    const { batch, deadline } = await ingestList(h.services, makePlates(300), {
      source: 'library',
      deadline: '8s',
      callbackUrl: rx.url,
    });
    expect(deadline?.feasibility).toBe('not feasible');
    const [risk] = await rx.waitFor(1, (d) => d.payload?.type === 'batch.at_risk');
    expect(risk!.verifyError).toBeUndefined();
    expect(risk!.payload.data).toMatchObject({ batchId: batch.id, account: 'default' });
    expect(risk!.payload.data.slackSeconds).toBeLessThan(0);
    expect(risk!.payload.data.summary).toMatch(/at risk of missing its deadline: late by/);
    const view = await new Batch(batch.id, h.services).progress();
    expect(view.deadline).toMatchObject({ atRisk: true, atRiskSince: expect.any(String) });
    // Two processes watch every 2 s: still one delivery of the event a few watches later.
    await sleep(5_000);
    const atRisk = rx.deliveries.filter((d) => d.payload?.type === 'batch.at_risk');
    expect(new Set(atRisk.map((d) => d.id)).size).toBe(1);
  });

  it('the rate raised (a bigger contract, the workers restarted with it): the batch is back on track, batch.back_on_track once', async () => {
    const rx: Receiver = await startReceiver(SECRET);
    closing.push(rx);
    const h = await harness.start({
      label: 'dl-back',
      config: { ...KNOWN, VQ_RATE_LIMIT: '2/s', VQ_WEBHOOK_SECRET: SECRET, VQ_WEBHOOK_ALLOW: '127.0.0.1' },
      workers: 0,
    });
    // Only deliveries run here (no plate worker): the turns below are the watch's, asked at will.
    const connection = connectRedis(h.config.redis, { name: 'vqb-test-webhooks' });
    const deliverer = startWebhookWorker(h.config, {
      connection,
      deliveries: h.services.webhooks.deliveries,
      logger: h.logs.logger,
    });
    closing.push({
      close: async () => {
        await deliverer?.close();
        connection.disconnect();
      },
    });
    // 100 plates at 2/s: about 110 s of requests against a deadline in 30 s.
    const { batch } = await ingestList(h.services, makePlates(100), {
      source: 'library',
      deadline: '30s',
      callbackUrl: rx.url,
    });
    const served = new Set(['default']);
    expect(await watchDeadlines(h.services, served, Date.now())).toMatchObject([{ type: 'batch.at_risk' }]);
    // Looked at again at the same rate: still at risk, nothing told twice.
    expect(await watchDeadlines(h.services, served, Date.now())).toEqual([]);
    // The account's limit raised to 50/s (its file, then the workers restarted with it): 100 plates
    // take about 4 s, the deadline has 25 s of room.
    const raised = parseRateLimit('50/s')!;
    const config = { ...h.config, accounts: h.config.accounts.map((a) => ({ ...a, rateLimit: raised })) };
    const after = await openQueueServices(config);
    closing.push({ close: () => after.close() });
    const [back] = await watchDeadlines(after, served, Date.now());
    expect(back).toMatchObject({ batchId: batch.id, type: 'batch.back_on_track' });
    expect(back!.slackMs).toBeGreaterThan(20_000);
    expect(await watchDeadlines(after, served, Date.now())).toEqual([]);
    // As a process with the raised rate shows it: in time, the flag gone.
    const view = await new Batch(batch.id, after).progress();
    expect(view.deadline).toMatchObject({ atRisk: false, feasibility: 'feasible' });
    expect(view.deadline?.atRiskSince).toBeUndefined();
    const [told] = await rx.waitFor(1, (d) => d.payload?.type === 'batch.back_on_track');
    expect(told!.verifyError).toBeUndefined();
    expect(told!.payload.data).toMatchObject({ batchId: batch.id, account: 'default' });
    expect(told!.payload.data.slackSeconds).toBeGreaterThan(20);
    expect(rx.deliveries.filter((d) => d.payload?.type === 'batch.at_risk')).toHaveLength(1);
    // Nothing was paid: no plate worker ran.
    expect(h.sim.stats().creates).toBe(0);
  });
});

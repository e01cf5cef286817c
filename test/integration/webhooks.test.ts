// Signed webhooks end to end: real Redis, the simulator over HTTP, in-process workers, and a real
// receiver (node:http) that verifies every delivery with the `standardwebhooks` package, as a
// customer's application would. Retries keep the webhook-id; a receiver that never answers holds
// up nothing; account.paused arrives when the key expires; bad targets are refused up front.
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, rename, rm, writeFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { clock } from '../../src/clock.js';
import { type Config, loadConfig, type Overrides } from '../../src/config.js';
import { ConfigError, isError } from '../../src/errors.js';
import { Batch, createVqb } from '../../src/index.js';
import { ingestList } from '../../src/producers/enqueue.js';
import { createInboxWatcher } from '../../src/producers/inbox.js';
import { createHttpApi } from '../../src/server.js';
import { hostAllowed } from '../../src/webhooks/target.js';
import { type Harness, makePlates, TEST_KEY, useHarness } from '../helpers/engine.js';
import { apiCall, expectError } from '../helpers/http.js';
import { harnessEnv, rejection, runVqb, waitFor } from '../helpers/process.js';
import { type Receiver, startReceiver } from '../helpers/webhook-receiver.js';

const SECRET = `whsec_${randomBytes(32).toString('base64')}`;
const TOKEN = 'svc-token-0123456789-webhooks';
const PUBLIC_URL = 'https://vqb.example.com';

const harness = useHarness();
const receivers: Receiver[] = [];
const apps: FastifyInstance[] = [];
afterEach(async () => {
  await Promise.all(apps.splice(0).map((a) => a.close()));
  await Promise.all(receivers.splice(0).map((r) => r.close()));
});

async function receiver(
  ...args: Parameters<typeof startReceiver> extends [string, ...infer R] ? R : never
): Promise<Receiver> {
  const rx = await startReceiver(SECRET, ...args);
  receivers.push(rx);
  return rx;
}

/** Webhooks on, to loopback only, retried fast. */
function settings(extra: Overrides = {}): Overrides {
  return {
    VQ_WEBHOOK_SECRET: SECRET,
    VQ_WEBHOOK_ALLOW: '127.0.0.1',
    VQ_WEBHOOK_BACKOFF: '50ms',
    VQ_WEBHOOK_ATTEMPTS: '6',
    VQ_WEBHOOK_TIMEOUT: '1s',
    VQ_PUBLIC_URL: PUBLIC_URL,
    VQ_API_TOKENS: TOKEN,
    ...extra,
  };
}

async function serve(
  h: Harness,
  config: Config = h.config,
): Promise<(path: string, options?: Parameters<typeof apiCall>[3]) => ReturnType<typeof apiCall>> {
  const app = await createHttpApi({ services: h.services, config, logger: h.logs.logger, dashboard: false });
  apps.push(app);
  await app.listen({ host: '127.0.0.1', port: 0 });
  const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  return (path, options) => apiCall(base, TOKEN, path, options);
}

async function batchStatus(h: Harness, id: string) {
  return new Batch(id, h.services).progress();
}

describe('webhooks: batch.finished', () => {
  it('a batch posted with a callbackUrl finishes and its receiver gets one signed batch.finished (verified), with counts and the results link; the status shows the delivery', async () => {
    const rx = await receiver();
    const h = await harness.start({ label: 'wh-api', config: settings(), workers: 2 });
    const call = await serve(h);
    const posted = await call('/v1/batches', {
      json: { plates: [...makePlates(5), 'NOPE'], name: 'hooks', callbackUrl: rx.url },
    });
    expect(posted.status).toBe(202);
    expect(posted.json.batch.callbackUrl).toBe(rx.url);
    const id: string = posted.json.batch.id;

    const [delivery] = await rx.waitFor(1);
    expect(delivery!.verifyError).toBeUndefined();
    expect(delivery!.id).toMatch(/^msg_[0-9a-f]{32}$/);
    expect(delivery!.payload).toMatchObject({
      type: 'batch.finished',
      timestamp: expect.any(String),
      data: {
        batchId: id,
        name: 'hooks',
        account: 'default',
        counts: { total: 6, enqueued: 5, done: 5, failed: 0, rejected: 1 },
        links: { results: `${PUBLIC_URL}/v1/batches/${id}/results` },
      },
    });

    await waitFor(async () => (await batchStatus(h, id)).webhooks?.[0]?.state === 'delivered');
    const view = (await call(`/v1/batches/${id}`)).json;
    expect(view.finished).toBe(true);
    // The counts of the event are the batch's, as its status shows them.
    expect(delivery!.payload.data.counts).toEqual(view.counts);
    // A sentence for a person, the duration in words (issue 22).
    expect(delivery!.payload.data.summary).toMatch(/^batch \S+ finished in \d+ s: \d+ done, \d+ failed, \d+ rejected$/);
    expect(view.webhooks).toEqual([
      {
        id: delivery!.id,
        event: 'batch.finished',
        url: rx.url,
        state: 'delivered',
        attempts: 1,
        lastStatus: 204,
        lastAttemptAt: expect.any(String),
        deliveredAt: expect.any(String),
        createdAt: expect.any(String),
      },
    ]);

    // Noticed again (another worker, a restart): the same job id, nothing sent twice.
    expect(await h.services.webhooks.batchFinished(id)).toBe(delivery!.id);
    const counts = await h.services.webhooks.queue.getJobCounts(
      'completed',
      'waiting',
      'delayed',
      'active',
      'prioritized',
    );
    expect(counts).toMatchObject({ completed: 1, waiting: 0, delayed: 0, active: 0, prioritized: 0 });
    expect(rx.deliveries).toHaveLength(1);
    // The outbox's queue was used for each event and each read above: one error listener, not one a
    // use (Node warned of a leak at eleven in a long watch test).
    expect(h.services.webhooks.queue.listenerCount('error')).toBe(1);

    // The same content again with another callbackUrl: the same (finished) batch, and the new receiver is told.
    const other = await receiver();
    const again = await call('/v1/batches', {
      json: { plates: [...makePlates(5), 'NOPE'], name: 'hooks', callbackUrl: other.url },
    });
    expect(again.json.batch).toMatchObject({ id, created: false, callbackUrl: other.url });
    const [toOther] = await other.waitFor(1);
    expect(toOther!.verifyError).toBeUndefined();
    expect(toOther!.payload.data.batchId).toBe(id);
    expect(rx.deliveries).toHaveLength(1);

    // The secret is in no log line and no config dump.
    const secretBody = SECRET.slice('whsec_'.length);
    expect(JSON.stringify(h.config)).not.toContain(secretBody);
    expect(h.logs.lines.map((l) => JSON.stringify(l)).join('\n')).not.toContain(secretBody);
    expect(h.logs.lines.some((l) => l.msg === 'webhook delivered' && l.webhookId === delivery!.id)).toBe(true);
  });

  it('a receiver failing the first three deliveries gets the fourth with the same webhook-id, each one signed anew and verified', async () => {
    const rx = await receiver((n) => (n < 3 ? 500 : 200));
    const h = await harness.start({ label: 'wh-retry', config: settings() });
    const { batch } = await ingestList(h.services, makePlates(3), { source: 'library', callbackUrl: rx.url });

    const deliveries = await rx.waitFor(4);
    expect(new Set(deliveries.map((d) => d.id)).size).toBe(1);
    for (const d of deliveries) {
      expect(d.verifyError).toBeUndefined();
      expect(d.payload.type).toBe('batch.finished');
    }
    // The same event each time: identical bytes, a timestamp per attempt.
    expect(new Set(deliveries.map((d) => d.body)).size).toBe(1);
    for (let i = 1; i < deliveries.length; i++)
      expect(deliveries[i]!.timestamp).toBeGreaterThanOrEqual(deliveries[i - 1]!.timestamp);

    await waitFor(async () => (await batchStatus(h, batch.id)).webhooks?.[0]?.state === 'delivered');
    expect((await batchStatus(h, batch.id)).webhooks?.[0]).toMatchObject({
      id: deliveries[0]!.id,
      attempts: 4,
      lastStatus: 200,
      state: 'delivered',
    });
    expect(h.logs.lines.filter((l) => l.msg === 'webhook delivery failed; it will be retried')).toHaveLength(3);
  });

  it('a receiver that never answers delays no batch: the batch is finished while its delivery is still pending, and the status says why it is not delivered', async () => {
    const rx = await receiver(() => 'hang');
    const h = await harness.start({ label: 'wh-hang', config: settings() });
    const { batch } = await ingestList(h.services, makePlates(4), { source: 'library', callbackUrl: rx.url });
    await h.waitForBatch(batch.id);
    const finished = await batchStatus(h, batch.id);
    expect(finished.finished).toBe(true);
    // The receiver holds its first delivery open: another batch runs to its end meanwhile.
    await rx.waitFor(1);
    const { batch: second } = await ingestList(h.services, makePlates(4, 100), { source: 'library', name: 'second' });
    await h.waitForBatch(second.id);
    const during = await batchStatus(h, batch.id);
    expect(during.finished).toBe(true);
    expect(during.webhooks?.[0]?.state).not.toBe('delivered');

    // Once the first attempt times out, the status says so, and the delivery is retried.
    await waitFor(async () => (await batchStatus(h, batch.id)).webhooks?.[0]?.state === 'retrying');
    expect((await batchStatus(h, batch.id)).webhooks?.[0]).toMatchObject({
      state: 'retrying',
      lastError: 'timeout',
    });
    await rx.waitFor(2);
    expect(new Set(rx.deliveries.map((d) => d.id)).size).toBe(1);
  });
});

describe('webhooks: nothing lost to a crash', () => {
  it('a batch finished by a process that stopped before emitting (the Lua ran, no job was added) is sent by the next worker that starts', async () => {
    const rx = await receiver();
    const h = await harness.start({ label: 'wh-sweep', config: settings(), workers: 0 });
    const plates = makePlates(2);
    const { batch } = await ingestList(h.services, plates, { source: 'library', callbackUrl: rx.url });
    // What a worker does up to its crash: the outcomes recorded, the batch finished by the script.
    for (const plate of plates)
      await h.services.outcomes.record(batch.account, {
        batchId: batch.id,
        plate,
        status: 'done',
        finishedAt: Date.now(),
        requests: 2,
        polls: 1,
        attempts: 1,
      });
    expect((await h.services.batchViews.get(batch.id)).finishedAt).toBeDefined();
    expect(await h.services.webhooks.queue.getJobCounts('waiting', 'completed')).toEqual({ waiting: 0, completed: 0 });

    h.startWorker();
    const [delivery] = await rx.waitFor(1);
    expect(delivery!.verifyError).toBeUndefined();
    expect(delivery!.payload).toMatchObject({
      type: 'batch.finished',
      data: { batchId: batch.id, counts: { done: 2 } },
    });
  });
});

describe('webhooks: the drop folder', () => {
  it('a file dropped in the inbox becomes a batch whose batch.finished goes to VQ_INBOX_NOTIFY_URL', async () => {
    const rx = await receiver();
    const root = await mkdtemp(join(tmpdir(), 'vqb-wh-inbox-'));
    try {
      const h = await harness.start({
        label: 'wh-inbox',
        config: settings({ VQ_ROOT: root, VQ_INBOX_NOTIFY_URL: rx.url, VQ_INBOX_STABLE: '100ms' }),
      });
      const watcher = createInboxWatcher({ services: h.services, config: h.config, logger: h.logs.logger });
      try {
        await mkdir(join(root, 'inbox'), { recursive: true });
        // Written as .part and renamed when complete: taken at the next scan.
        await writeFile(join(root, 'inbox', 'frota.csv.part'), 'placa;cliente\r\nABC1234;1\r\nXYZ9Z99;2\r\n');
        await rename(join(root, 'inbox', 'frota.csv.part'), join(root, 'inbox', 'frota.csv'));
        await waitFor(async () => {
          await watcher.scanOnce();
          return (await h.services.batchViews.list()).total === 1;
        });
        const [delivery] = await rx.waitFor(1);
        expect(delivery!.verifyError).toBeUndefined();
        expect(delivery!.payload).toMatchObject({
          type: 'batch.finished',
          data: { source: 'inbox', name: 'frota.csv', counts: { enqueued: 2, done: 2 } },
        });
      } finally {
        await watcher.stop();
      }
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  });
});

describe('webhooks: account.paused and account.resumed', () => {
  it("an expired key pauses the account: each waiting batch's callbackUrl and VQ_WEBHOOK_URL get account.paused with the advice, and account.resumed when it goes on", async () => {
    const rx = await receiver();
    const h = await harness.start({
      label: 'wh-paused',
      config: settings({
        VQ_RATE_LIMIT: '40/s',
        VQ_CONCURRENCY: '4',
        VQ_WEBHOOK_URL: `${rx.url.replace('/hooks', '/global')}`,
      }),
    });
    const { batch } = await ingestList(h.services, makePlates(120), { source: 'library', callbackUrl: rx.url });
    await waitFor(async () => (await h.services.batchViews.get(batch.id)).counts.done >= 10);
    h.sim.keys.expire(TEST_KEY);

    const paused = await rx.waitFor(2, (d) => d.payload?.type === 'account.paused');
    for (const d of paused) expect(d.verifyError).toBeUndefined();
    const forBatch = paused.find((d) => d.path === '/hooks');
    const global = paused.find((d) => d.path === '/global');
    expect(forBatch?.payload.data).toMatchObject({
      account: 'default',
      code: 'EXPIRED_API_KEY',
      batchId: batch.id,
      message: expect.stringMatching(/expired.*vqb resume/s),
    });
    expect(forBatch?.payload.data.links.results).toBe(`${PUBLIC_URL}/v1/batches/${batch.id}/results`);
    expect(global?.payload.data).toMatchObject({ account: 'default', code: 'EXPIRED_API_KEY' });
    expect(global?.payload.data.batchId).toBeUndefined();
    expect(forBatch!.id).not.toBe(global!.id);

    await waitFor(
      async () =>
        (await batchStatus(h, batch.id)).webhooks?.some(
          (w) => w.event === 'account.paused' && w.state === 'delivered',
        ) === true,
    );
    const view = await batchStatus(h, batch.id);
    expect(view.finished).toBe(false);
    expect(view.waiting?.code).toBe('EXPIRED_API_KEY');
    // Paused once, told once.
    expect(rx.deliveries.filter((d) => d.payload?.type === 'account.paused')).toHaveLength(2);

    // The key rotated and the account resumed (as `vqb resume` does): the same receivers hear it, and the batch finishes.
    h.sim.keys.add({ key: 'rotated-key-2' });
    await writeFile(h.keyFile, 'rotated-key-2\n');
    const vqb = await createVqb({ config: h.config, logger: h.logs.logger });
    try {
      await vqb.resume();
    } finally {
      await vqb.close();
    }
    const resumed = await rx.waitFor(2, (d) => d.payload?.type === 'account.resumed');
    for (const d of resumed) expect(d.verifyError).toBeUndefined();
    expect(resumed.find((d) => d.path === '/hooks')?.payload.data).toMatchObject({
      account: 'default',
      code: 'EXPIRED_API_KEY',
      batchId: batch.id,
      resumedAt: expect.any(String),
    });
    expect(resumed.find((d) => d.path === '/global')?.payload.data).toMatchObject({
      account: 'default',
      code: 'EXPIRED_API_KEY',
    });
    expect(resumed[0]!.payload.data.summary).toMatch(/^account default resumed after \d+ s paused \(/);
    const [finished] = await rx.waitFor(1, (d) => d.payload?.type === 'batch.finished');
    expect(finished!.payload.data.counts).toMatchObject({ enqueued: 120, done: 120, failed: 0 });

    // An operator's own pause and resume send nothing.
    await h.line.pauseByOperator();
    expect(await h.services.webhooks.accountResumed('default', await h.line.resume())).toEqual([]);
  });
});

describe('webhooks: bad targets are refused up front, nothing stored', () => {
  it('the API refuses a URL that is not http(s), has credentials, or whose host is not on VQ_WEBHOOK_ALLOW, in our error shape', async () => {
    const h = await harness.start({
      label: 'wh-bad',
      config: settings({ VQ_WEBHOOK_ALLOW: '127.0.0.1,*.example.com' }),
      workers: 0,
      // hooks.example.com is resolved when its batch is made: answered here, no lookup leaves the machine.
      resolve: async (name) => (name === 'hooks.example.com' ? [{ address: '93.184.215.14', family: 4 }] : []),
    });
    const call = await serve(h);
    const plates = makePlates(2);
    for (const [url, code] of [
      ['ftp://127.0.0.1/x', 'CALLBACK_URL_INVALID'],
      ['not a url', 'CALLBACK_URL_INVALID'],
      ['javascript:alert(1)', 'CALLBACK_URL_INVALID'],
      ['http://user:pw@127.0.0.1/x', 'CALLBACK_URL_INVALID'],
      ['http://evil.test/x', 'CALLBACK_HOST_NOT_ALLOWED'],
      ['https://example.com/x', 'CALLBACK_HOST_NOT_ALLOWED'],
      ['http://127.0.0.1.evil.test/x', 'CALLBACK_HOST_NOT_ALLOWED'],
    ] as const) {
      const answer = await call('/v1/batches', { json: { plates, callbackUrl: url } });
      expectError(answer, 422, code);
    }
    // A CSV body takes it in the query string; the same checks apply.
    const csv = await call(`/v1/batches?callbackUrl=${encodeURIComponent('http://evil.test/x')}`, {
      body: 'placa\nABC1234\n',
      type: 'text/csv',
    });
    expectError(csv, 422, 'CALLBACK_HOST_NOT_ALLOWED');
    expect((await call('/v1/batches')).json.total).toBe(0);

    // A subdomain of an allowed wildcard is fine.
    const ok = await call('/v1/batches', { json: { plates, callbackUrl: 'https://hooks.example.com/vqb' } });
    expect(ok.status).toBe(202);
    expect(ok.json.batch.callbackUrl).toBe('https://hooks.example.com/vqb');
  });

  it('the library refuses a bad callbackUrl with a typed error and a misspelt option with BAD_OPTIONS, storing nothing', async () => {
    const h = await harness.start({ label: 'wh-lib', config: settings(), workers: 0 });
    const vqb = await createVqb({ config: h.config, logger: h.logs.logger });
    try {
      const bad = await rejection(vqb.enqueue(['ABC1234'], { callbackUrl: 'http://evil.test/' }));
      expect(bad).toMatchObject({ code: 'CALLBACK_HOST_NOT_ALLOWED' });
      const typo = await rejection(vqb.enqueue(['ABC1234'], { callbakUrl: 'http://127.0.0.1/' } as never));
      expect(typo).toMatchObject({ code: 'BAD_OPTIONS', message: expect.stringMatching(/callbakUrl/) });
      expect((await h.services.batchViews.list()).total).toBe(0);
    } finally {
      await vqb.close();
    }
  });

  it('without a secret no callbackUrl is accepted (WEBHOOK_SECRET_MISSING); a malformed secret stops start-up without printing it', async () => {
    const h = await harness.start({ label: 'wh-nosecret', config: { VQ_API_TOKENS: TOKEN }, workers: 0 });
    const call = await serve(h);
    expectError(
      await call('/v1/batches', { json: { plates: ['ABC1234'], callbackUrl: 'http://127.0.0.1/x' } }),
      422,
      'WEBHOOK_SECRET_MISSING',
    );
    expect((await call('/v1/batches')).json.total).toBe(0);

    for (const secret of ['not-a-secret-at-all-1234567890', 'whsec_c2hvcnQ=', `whsec_${'!'.repeat(40)}`]) {
      let caught: unknown;
      try {
        loadConfig({ VQ_WEBHOOK_SECRET: secret });
      } catch (err) {
        caught = err;
      }
      expect(isError(caught, ConfigError)).toBe(true);
      expect((caught as ConfigError).variable).toBe('VQ_WEBHOOK_SECRET');
      expect((caught as Error).message).not.toContain(secret);
    }
    const file = join(h.config.outDir, '..', 'webhook-secret');
    await writeFile(file, `${SECRET}\n`);
    expect(loadConfig({ VQ_WEBHOOK_SECRET_FILE: file }).webhooks.secret?.reveal()).toBe(SECRET);
    expect(() => loadConfig({ VQ_WEBHOOK_URL: 'http://127.0.0.1/x' })).toThrow(/VQ_WEBHOOK_SECRET/);
    expect(() =>
      loadConfig({
        VQ_WEBHOOK_SECRET: SECRET,
        VQ_WEBHOOK_ALLOW: 'hooks.example.com',
        VQ_INBOX_NOTIFY_URL: 'http://127.0.0.1/x',
      }),
    ).toThrow(/VQ_WEBHOOK_ALLOW/);
  });

  it('the allow-list: exact hosts (with or without a port) and *.domain for its subdomains only', () => {
    expect(hostAllowed('hooks.example.com', ['hooks.example.com'])).toBe(true);
    expect(hostAllowed('hooks.example.com:8443', ['hooks.example.com'])).toBe(true);
    expect(hostAllowed('hooks.example.com:8443', ['hooks.example.com:9000'])).toBe(false);
    expect(hostAllowed('a.b.example.com', ['*.example.com'])).toBe(true);
    expect(hostAllowed('example.com', ['*.example.com'])).toBe(false);
    expect(hostAllowed('evilexample.com', ['*.example.com'])).toBe(false);
    expect(hostAllowed('anything.test', [])).toBe(true);
  });
});

describe('vqb run --notify', () => {
  it("each recorded attempt is a message: a wait of an hour on a batch's attempts ends at the attempt", async () => {
    const h = await harness.start({ label: 'wh-heard', workers: 0 });
    await h.open('heard');
    const ref = 'heard';
    const log = h.services.webhooks.deliveries;
    const attempts = await log.attempts(ref, clock);
    expect(attempts).toBeDefined();
    try {
      const woke = attempts!.next(3_600_000);
      const record = { id: 'msg_1', event: 'batch.finished', url: 'http://127.0.0.1:1/h', createdAt: 1 } as const;
      await log.emitted(ref, { ...record, state: 'pending', attempts: 0 });
      await log.update(ref, { ...record, state: 'delivered', attempts: 1, deliveredAt: 2 });
      await woke;
      expect((await log.list(ref))[0]).toMatchObject({ state: 'delivered', attempts: 1 });
    } finally {
      attempts!.close();
    }
    expect(await log.attempts('no-such-batch', clock)).toBeUndefined();
  });

  it('runs a CSV and sends batch.finished, signed, to the --notify URL; a URL off the allow-list is refused before anything is queued', async () => {
    const rx = await receiver();
    const h = await harness.start({ label: 'wh-run', workers: 0 });
    const file = join(h.config.outDir, '..', 'notify.csv');
    await writeFile(file, 'placa\r\nABC1234\r\nXYZ9Z99\r\n');
    const env = harnessEnv(h, { VQ_WEBHOOK_SECRET: SECRET, VQ_WEBHOOK_ALLOW: '127.0.0.1' });

    const refused = await runVqb(['run', file, '--notify', 'http://evil.test/hook'], env);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/VQ_WEBHOOK_ALLOW/);
    expect((await h.services.batchViews.list()).total).toBe(0);

    const run = await runVqb(['run', file, '--notify', rx.url], env);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    const [delivery] = await rx.waitFor(1);
    expect(delivery!.verifyError).toBeUndefined();
    expect(delivery!.payload).toMatchObject({ type: 'batch.finished', data: { counts: { enqueued: 2, done: 2 } } });
    expect(run.stdout).toContain(`webhook batch.finished delivered to ${rx.url} (webhook-id ${delivery!.id})`);

    const status = await runVqb(['status', delivery!.payload.data.batchId, '--json'], env);
    expect(JSON.parse(status.stdout).webhooks[0]).toMatchObject({ id: delivery!.id, state: 'delivered', attempts: 1 });

    // The same file again (the finished batch, resumed) with another --notify URL: that one is told too.
    const other = await receiver();
    const again = await runVqb(['run', file, '--notify', other.url], env);
    expect(again.code).toBe(0);
    const [second] = await other.waitFor(1);
    expect(second!.verifyError).toBeUndefined();
    expect(second!.payload.data.batchId).toBe(delivery!.payload.data.batchId);
    expect(second!.id).not.toBe(delivery!.id);
    expect(again.stdout).toContain(`webhook batch.finished delivered to ${other.url}`);
    expect(rx.deliveries).toHaveLength(1);
  });
});

// Security issue #35, finding 3: a tenant's callbackUrl must not make vqb call into its own
// network. Written as the penetration test's attacks, through the HTTP API (real fastify, real
// Redis, real workers): internal addresses in every spelling refused when the batch is made,
// nothing stored; a name resolving to loopback refused; a name that resolves to a public address
// when checked and to loopback when sent (DNS rebinding) gets no connection; and a delivery's
// status says a category, never the socket's words. Name resolution is injected (like the
// clock): no lookup leaves this machine, and the "public" address below is never connected to.
import { randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import type { Overrides } from '../../src/config.js';
import { ingestList } from '../../src/producers/enqueue.js';
import { createHttpApi } from '../../src/server.js';
import type { Resolve } from '../../src/webhooks/address.js';
import { type Harness, makePlates, useHarness } from '../helpers/engine.js';
import { apiCall, expectError } from '../helpers/http.js';
import { freePort, rejection, waitFor } from '../helpers/process.js';
import { type Receiver, startReceiver } from '../helpers/webhook-receiver.js';

const SECRET = `whsec_${randomBytes(32).toString('base64')}`;
const TOKEN = 'svc-token-0123456789-wh-targets';
/** A public address (example.com's) that answers names at check time in these tests; never connected to. */
const PUBLIC = '93.184.215.14';

const harness = useHarness();
const receivers: Receiver[] = [];
const apps: FastifyInstance[] = [];
afterEach(async () => {
  await Promise.all(apps.splice(0).map((a) => a.close()));
  await Promise.all(receivers.splice(0).map((r) => r.close()));
});

function settings(extra: Overrides = {}): Overrides {
  return {
    VQ_WEBHOOK_SECRET: SECRET,
    VQ_WEBHOOK_BACKOFF: '50ms',
    VQ_WEBHOOK_ATTEMPTS: '3',
    VQ_WEBHOOK_TIMEOUT: '1s',
    VQ_API_TOKENS: TOKEN,
    ...extra,
  };
}

/** A resolver from a table of names; a name not in it is an error (as NXDOMAIN is). */
function resolver(table: Record<string, string[]>, calls: string[] = []): Resolve {
  return async (name) => {
    calls.push(name);
    const answers = table[name];
    if (!answers) throw Object.assign(new Error(`queryA ENOTFOUND ${name}`), { code: 'ENOTFOUND' });
    return answers.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
  };
}

async function serve(h: Harness) {
  const app = await createHttpApi({ services: h.services, config: h.config, logger: h.logs.logger, dashboard: false });
  apps.push(app);
  await app.listen({ host: '127.0.0.1', port: 0 });
  const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  return (path: string, options?: Parameters<typeof apiCall>[3]) => apiCall(base, TOKEN, path, options);
}

describe('webhook targets: internal addresses are refused when the batch is made (issue #35)', () => {
  it("the pentest's five URLs, and other spellings of internal addresses, are 422 CALLBACK_ADDRESS_FORBIDDEN through the API with VQ_WEBHOOK_ALLOW unset; nothing is stored", async () => {
    const lookups: string[] = [];
    const h = await harness.start({
      label: 'wh-ssrf',
      config: settings(),
      workers: 0,
      resolve: resolver({}, lookups),
    });
    const call = await serve(h);
    const plates = makePlates(2);
    for (const url of [
      // The five of the report.
      'http://169.254.169.254/latest/meta-data/iam/security-credentials/',
      'http://10.0.0.1:6379/',
      'http://2852039166/',
      'http://[::ffff:a9fe:a9fe]/',
      'http://metadata.google.internal/computeMetadata/v1/',
      // Other spellings and ranges.
      'http://127.0.0.1:6379/',
      'http://0x7f.1/',
      'http://0177.0.0.1/',
      'http://127.1/',
      'http://0/',
      'http://[::1]/',
      'http://[::]/',
      'http://[::ffff:127.0.0.1]/',
      'http://[::127.0.0.1]/',
      'http://[64:ff9b::a9fe:a9fe]/',
      'http://[2002:a9fe:a9fe::1]/',
      'http://[fe80::1]/',
      'http://[fd00::1]/',
      'http://100.100.100.200/latest/meta-data/',
      'http://172.16.0.1/',
      'http://192.168.1.1/',
      'http://224.0.0.1/',
      'http://255.255.255.255/',
      'http://localhost:8080/',
      'http://LOCALHOST./',
      'http://metadata/',
      'http://metadata.google.internal./',
      'http://redis:6379/',
      'http://printer.local/',
    ]) {
      const answer = await call('/v1/batches', { json: { plates, callbackUrl: url } });
      expectError(answer, 422, 'CALLBACK_ADDRESS_FORBIDDEN');
      expect(answer.json.error.message).toMatch(/public addresses only/);
    }
    // A CSV body takes it in the query string: the same refusal.
    const csv = await call(`/v1/batches?callbackUrl=${encodeURIComponent('http://2852039166/')}`, {
      body: 'placa\nABC1234\n',
      type: 'text/csv',
    });
    expectError(csv, 422, 'CALLBACK_ADDRESS_FORBIDDEN');
    // Nothing stored, nothing queued (so nothing paid), and no name was even looked up.
    expect((await call('/v1/batches')).json.total).toBe(0);
    expect(await h.services.accounts.counts('wait', 'prioritized', 'delayed')).toEqual(
      expect.objectContaining({ wait: 0, prioritized: 0, delayed: 0 }),
    );
    expect(lookups).toEqual([]);
  });

  it('a name that resolves to 127.0.0.1 (or to a public and an internal address) is refused; one that does not resolve is CALLBACK_HOST_UNRESOLVED; nothing stored', async () => {
    const h = await harness.start({
      label: 'wh-ssrf-dns',
      config: settings({ VQ_WEBHOOK_ALLOW: '*.customer.test' }),
      workers: 0,
      resolve: resolver({
        'loopback.customer.test': ['127.0.0.1'],
        'mixed.customer.test': [PUBLIC, '10.0.0.1'],
        'mapped.customer.test': ['::ffff:169.254.169.254'],
      }),
    });
    const call = await serve(h);
    const plates = makePlates(2);
    // A wildcard on the allow-list never opens internal addresses.
    for (const host of ['loopback.customer.test', 'mixed.customer.test', 'mapped.customer.test']) {
      const answer = await call('/v1/batches', { json: { plates, callbackUrl: `https://${host}/hooks` } });
      expectError(answer, 422, 'CALLBACK_ADDRESS_FORBIDDEN');
      // Which address the name has is not told to the tenant.
      expect(answer.text).not.toMatch(/127\.0\.0\.1|10\.0\.0\.1|169\.254/);
    }
    expectError(
      await call('/v1/batches', { json: { plates, callbackUrl: 'https://nxdomain.customer.test/hooks' } }),
      422,
      'CALLBACK_HOST_UNRESOLVED',
    );
    // The library's way in takes the same check.
    const lib = await rejection(
      ingestList(h.services, plates, { source: 'library', callbackUrl: 'https://loopback.customer.test/' }),
    );
    expect(lib).toMatchObject({ code: 'CALLBACK_ADDRESS_FORBIDDEN' });
    expect((await call('/v1/batches')).json.total).toBe(0);
  });
});

describe('webhook targets: checked again at send time', () => {
  it('a name that resolves to a public address when the batch is made and to 127.0.0.1 when it is sent (DNS rebinding) gets no connection; the status says refused_address', async () => {
    const rx = await startReceiver(SECRET);
    receivers.push(rx);
    // The first lookup (the check when the batch is made) answers a public address; every later
    // one (the delivery's connection) answers the loopback address where a receiver listens.
    const lookups: string[] = [];
    const answers = resolver({ 'rebind.customer.test': ['127.0.0.1'] }, lookups);
    const rebinding: Resolve = async (name) => {
      if (lookups.length > 0) return answers(name);
      lookups.push(name);
      return [{ address: PUBLIC, family: 4 }];
    };
    const h = await harness.start({
      label: 'wh-rebind',
      // 127.0.0.1 named exactly opens that literal host only, not a name that resolves to it.
      config: settings({ VQ_WEBHOOK_ALLOW: '127.0.0.1,*.customer.test' }),
      resolve: rebinding,
    });
    const call = await serve(h);
    const url = `http://rebind.customer.test:${rx.port}/hooks`;
    const posted = await call('/v1/batches', { json: { plates: makePlates(2), callbackUrl: url } });
    expect(posted.status).toBe(202);
    const id: string = posted.json.batch.id;

    await waitFor(async () => (await call(`/v1/batches/${id}`)).json.webhooks?.[0]?.state === 'failed');
    const view = (await call(`/v1/batches/${id}`)).json;
    expect(view.webhooks).toEqual([
      expect.objectContaining({ url, state: 'failed', attempts: 1, lastError: 'refused_address' }),
    ]);
    expect(view.webhooks[0].lastStatus).toBeUndefined();
    // Not retried (the answer would not change by waiting), and no connection was made.
    expect(lookups.length).toBeGreaterThanOrEqual(2);
    expect(rx.connections()).toBe(0);
    expect(rx.deliveries).toHaveLength(0);
    expect(JSON.stringify(view)).not.toMatch(/127\.0\.0\.1|ECONN|CALLBACK_ADDRESS_FORBIDDEN/);
  });

  it('a receiver whose port is closed shows connect_failed, never the socket error (ECONNREFUSED and the address)', async () => {
    const port = await freePort();
    const h = await harness.start({
      label: 'wh-closed',
      config: settings({ VQ_WEBHOOK_ALLOW: '127.0.0.1', VQ_WEBHOOK_ATTEMPTS: '1' }),
    });
    const call = await serve(h);
    const { batch } = await ingestList(h.services, makePlates(2), {
      source: 'library',
      callbackUrl: `http://127.0.0.1:${port}/hooks`,
    });
    await waitFor(async () => (await call(`/v1/batches/${batch.id}`)).json.webhooks?.[0]?.state === 'failed');
    const view = (await call(`/v1/batches/${batch.id}`)).json;
    expect(view.webhooks[0]).toMatchObject({ state: 'failed', attempts: 1, lastError: 'connect_failed' });
    expect(JSON.stringify(view.webhooks)).not.toMatch(/ECONNREFUSED|connect /);
    // The operator's log says what happened, in categories at warn level and above.
    const loud = h.logs.lines.filter((l) => Number(l.level) >= 40 && String(l.msg).startsWith('webhook'));
    expect(loud.length).toBeGreaterThan(0);
    expect(JSON.stringify(loud)).not.toMatch(/ECONNREFUSED/);
  });

  it("the operator's own receiver, named exactly on VQ_WEBHOOK_ALLOW, still gets its signed webhook on 127.0.0.1", async () => {
    const rx = await startReceiver(SECRET);
    receivers.push(rx);
    const h = await harness.start({
      label: 'wh-named',
      config: settings({ VQ_WEBHOOK_ALLOW: `127.0.0.1:${rx.port}` }),
    });
    const { batch } = await ingestList(h.services, makePlates(2), { source: 'library', callbackUrl: rx.url });
    const [delivery] = await rx.waitFor(1);
    expect(delivery!.verifyError).toBeUndefined();
    expect(delivery!.payload.data.batchId).toBe(batch.id);
    // Another port of the same address is not named: refused (ingestList refuses a URL it can judge synchronously).
    const other = await rejection(
      (async () =>
        ingestList(h.services, makePlates(2, 10), {
          source: 'library',
          callbackUrl: `http://127.0.0.1:${rx.port + 1}/`,
        }))(),
    );
    expect(other).toMatchObject({ code: 'CALLBACK_HOST_NOT_ALLOWED' });
  });
});

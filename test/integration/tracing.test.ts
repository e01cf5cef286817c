// Issue 47: one OpenTelemetry trace per plate. Real processes (`vqb serve --workers`; `vqb serve`
// beside `vqb work`) export over OTLP/HTTP (JSON) to a receiver in this test, which decodes what
// they sent: one plate's spans form one tree, in order, parent to child, across both queues and
// both processes; and nothing secret (the key, a token, a result's values, the plate) leaves.
import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { readFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { fakeVehicle } from '../../src/simulator/vehicle.js';
import { type Harness, makePlates, sleep, useHarness } from '../helpers/engine.js';
import { answering, freePort, harnessEnv, modulesLoadedBy, spawnVqb, type VqbProcess } from '../helpers/process.js';
import { type Receiver, startReceiver } from '../helpers/webhook-receiver.js';

const TOKEN = 'tracing-test-token-0123456789';
const SECRET = `whsec_${Buffer.from('tracing-test-webhook-secret-32by').toString('base64')}`;
const harness = useHarness();
const children: ChildProcess[] = [];
const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const child of children.splice(0)) if (child.exitCode === null) child.kill('SIGKILL');
  for (const close of closers.splice(0)) await close();
});

interface Span {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  startTimeUnixNano: string;
  attributes?: { key: string; value: Record<string, unknown> }[];
  links?: { traceId: string; spanId: string }[];
  service: string;
}

/** A small OTLP/HTTP receiver: every body as received (for the grep) and every span decoded. */
async function startCollector(): Promise<{ url: string; bodies: string[]; spans: () => Span[] }> {
  const bodies: string[] = [];
  const server: Server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      bodies.push(body);
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  closers.push(() => new Promise((done) => server.close(() => done())));
  const spans = () =>
    bodies.flatMap((body) => {
      const sent = JSON.parse(body) as {
        resourceSpans?: {
          resource?: { attributes?: { key: string; value: { stringValue?: string } }[] };
          scopeSpans?: { spans?: Omit<Span, 'service'>[] }[];
        }[];
      };
      return (sent.resourceSpans ?? []).flatMap((rs) => {
        const service = rs.resource?.attributes?.find((a) => a.key === 'service.name')?.value.stringValue ?? '';
        return (rs.scopeSpans ?? []).flatMap((ss) => (ss.spans ?? []).map((s) => ({ ...s, service })));
      });
    });
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, bodies, spans };
}

function attr(span: Span, key: string): unknown {
  const value = span.attributes?.find((a) => a.key === key)?.value;
  if (value === undefined) return undefined;
  const v = value.stringValue ?? value.intValue ?? value.boolValue ?? value.doubleValue;
  return typeof v === 'string' && value.intValue !== undefined ? Number(v) : v;
}

function otel(collector: string, service: string): Record<string, string> {
  return {
    OTEL_EXPORTER_OTLP_ENDPOINT: collector,
    OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
    OTEL_SERVICE_NAME: service,
    OTEL_BSP_SCHEDULE_DELAY: '100',
  };
}

function webhookEnv(): Record<string, string> {
  return {
    VQ_API_TOKENS: TOKEN,
    VQ_WEBHOOK_SECRET: SECRET,
    VQ_WEBHOOK_ALLOW: '127.0.0.1',
    VQ_WEBHOOK_TIMEOUT: '2s',
  };
}

/** Posts one plate (with a callbackUrl) and waits for its batch to finish. */
async function onePlate(base: string, plate: string, callbackUrl?: string): Promise<string> {
  const auth = { authorization: `Bearer ${TOKEN}` };
  const posted = await fetch(`${base}/v1/batches`, {
    method: 'POST',
    headers: { ...auth, 'content-type': 'application/json' },
    body: JSON.stringify({ plates: [plate], ...(callbackUrl ? { callbackUrl } : {}) }),
  });
  expect(posted.status).toBe(202);
  const { batch } = (await posted.json()) as { batch: { id: string } };
  for (let i = 0; i < 300; i++) {
    const view = (await (await fetch(`${base}/v1/batches/${batch.id}`, { headers: auth })).json()) as {
      finished: boolean;
    };
    if (view.finished) return batch.id;
    await sleep(100);
  }
  throw new Error('the batch never finished');
}

/** Stops the processes (SIGTERM: the spans not yet sent are flushed) and waits for their exit. */
async function stop(...processes: VqbProcess[]): Promise<void> {
  for (const p of processes) p.child.kill('SIGTERM');
  for (const p of processes) expect((await p.done).code).toBe(0);
}

/** The plate's trace: its spans, and the checks every plate's tree passes. */
function plateTree(spans: Span[], batchId: string): { trace: Span[]; byName: (name: string) => Span[] } {
  const roots = spans.filter((s) => s.name === 'vqb.plate' && attr(s, 'vqb.batch.id') === batchId);
  expect(roots).toHaveLength(1);
  const root = roots[0]!;
  const trace = spans.filter((s) => s.traceId === root.traceId);
  const byId = new Map(trace.map((s) => [s.spanId, s]));
  const byName = (name: string) => trace.filter((s) => s.name === name);
  const parentOf = (s: Span) => (s.parentSpanId ? byId.get(s.parentSpanId) : undefined);
  const start = (s: Span) => BigInt(s.startTimeUnixNano);

  // The root has no parent, names its door, and is linked to the batch's span (its own trace).
  expect(root.parentSpanId ?? '').toBe('');
  expect(attr(root, 'vqb.door')).toBe('api');
  const batch = spans.find((s) => s.name === 'vqb.batch' && attr(s, 'vqb.batch.id') === batchId);
  expect(batch).toBeDefined();
  expect(root.links?.map((l) => l.spanId)).toEqual([batch!.spanId]);
  // The batch's span is a child of the API request's (the front door), in a trace of its own.
  expect(batch!.parentSpanId).toBeTruthy();
  expect(spans.find((s) => s.spanId === batch!.parentSpanId)?.traceId).toBe(batch!.traceId);

  // The wait in vqb's scheduler, under the root, names why.
  const [wait, ...moreWaits] = byName('vqb.scheduler.wait');
  expect(moreWaits).toEqual([]);
  expect(parentOf(wait!)).toBe(root);
  expect(['pace', 'share', 'hold', 'first_contact', 'deadline']).toContain(attr(wait!, 'vqb.wait.reason'));
  expect(attr(wait!, 'vqb.account.id')).toBe('default');

  // The BullMQ job's activations, under the wait: the create and each poll under one of them.
  const jobs = trace.filter((s) => s.name.startsWith('process ') && parentOf(s) === wait);
  expect(jobs.length).toBeGreaterThanOrEqual(1);
  const [create, ...moreCreates] = byName('vqb.create');
  expect(moreCreates).toEqual([]);
  expect(jobs).toContain(parentOf(create!));
  expect(attr(create!, 'http.response.status_code')).toBe(201);
  expect(attr(create!, 'vqb.batch.id')).toBe(batchId);
  // Its wait for a slot, inside it.
  expect(byName('vqb.slot.wait').filter((s) => parentOf(s) === create).length).toBeGreaterThanOrEqual(1);
  const polls = byName('vqb.poll');
  expect(polls.length).toBeGreaterThanOrEqual(1);
  for (const poll of polls) {
    expect(jobs).toContain(parentOf(poll));
    expect(attr(poll, 'http.response.status_code')).toBe(200);
  }
  // The result stored, under the poll that read it, with the plate's outcome.
  const [store] = byName('vqb.store');
  expect(polls).toContain(parentOf(store!));
  expect(attr(store!, 'vqb.plate.outcome')).toBe('done');

  // In order: front door, wait, job, create, polls, store.
  const order = [root, wait!, parentOf(create!)!, create!, ...polls, store!].map(start);
  expect([...order].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))).toEqual(order);
  return { trace, byName };
}

function near(text: string, found: string): string {
  const at = text.indexOf(found);
  return at < 0 ? '' : text.slice(Math.max(0, at - 300), at + 100);
}

async function secrets(h: Harness): Promise<string[]> {
  return [(await readFile(h.keyFile, 'utf8')).trim(), TOKEN, SECRET];
}

describe('tracing (OpenTelemetry, OTLP/HTTP)', () => {
  it('one plate through `vqb serve --workers` makes one trace: door, wait and why, job, create, polls, store, webhook; nothing secret leaves', async () => {
    const h = await harness.start({ label: 'tracing-one', workers: 0 });
    const collector = await startCollector();
    const rx: Receiver = await startReceiver(SECRET);
    closers.push(() => rx.close());
    const port = await freePort();
    const serve = spawnVqb(
      ['serve', '--workers', '--no-inbox'],
      harnessEnv(h, { VQ_HTTP_PORT: String(port), ...webhookEnv(), ...otel(collector.url, 'vqb-one') }),
    );
    children.push(serve.child);
    const base = `http://127.0.0.1:${port}`;
    await answering(base, serve);
    const [plate] = makePlates(1, 7);
    const batchId = await onePlate(base, plate!, rx.url);
    await rx.waitFor(1);
    const open = await (
      await fetch(`${base}/metrics`, { headers: { accept: 'application/openmetrics-text; version=1.0.0' } })
    ).text();
    const plain = await (await fetch(`${base}/metrics`)).text();
    await stop(serve);

    const spans = collector.spans();
    const { trace, byName } = plateTree(spans, batchId);
    // The webhook delivery the plate's last step queued, in the same trace, after the store.
    const [deliver] = byName('vqb.webhook.deliver');
    expect(deliver).toBeDefined();
    expect(attr(deliver!, 'http.response.status_code')).toBe(204);
    expect(attr(deliver!, 'vqb.webhook.event')).toBe('batch.finished');
    expect(BigInt(deliver!.startTimeUnixNano)).toBeGreaterThan(BigInt(byName('vqb.store')[0]!.startTimeUnixNano));
    expect(new Set(trace.map((s) => s.service))).toEqual(new Set(['vqb-one']));
    // Exemplars: the latency histograms point at the plate's trace (OpenMetrics only; the
    // Prometheus text stays as it was).
    const traceId = trace[0]!.traceId;
    expect(open).toMatch(new RegExp(`^vqb_query_duration_seconds_bucket\\{.*\\} 1 # \\{trace_id="${traceId}"\\}`, 'm'));
    expect(open).toMatch(
      new RegExp(
        `^vqb_upstream_request_duration_seconds_bucket\\{.*operation="create".*# \\{trace_id="${traceId}"\\}`,
        'm',
      ),
    );
    expect(plain).toContain('vqb_upstream_request_duration_seconds_bucket{');
    expect(plain).not.toContain('trace_id');
    // The plate as a hash only.
    expect(attr(byName('vqb.plate')[0]!, 'vqb.plate.hash')).toMatch(/^[0-9a-f]{16}$/);

    // Nothing secret in anything the receiver got: no key, no token, no webhook secret, none of
    // the result's values, not the plate itself.
    const everything = collector.bodies.join('\n');
    const vehicle = fakeVehicle(plate!);
    for (const secret of [...(await secrets(h)), vehicle.brand, vehicle.model, vehicle.city, plate!])
      expect(everything.includes(secret), `exported: ${secret} in ${near(everything, secret)}`).toBe(false);
  }, 90_000);

  it('across two processes (API in `vqb serve`, worker in `vqb work`) the plate keeps one trace; VQ_TRACE_PLATES=true shows the plate', async () => {
    const h = await harness.start({ label: 'tracing-two', workers: 0 });
    const collector = await startCollector();
    const port = await freePort();
    const api = spawnVqb(
      ['serve', '--no-inbox'],
      harnessEnv(h, {
        VQ_HTTP_PORT: String(port),
        VQ_TRACE_PLATES: 'true',
        ...webhookEnv(),
        ...otel(collector.url, 'vqb-api'),
      }),
    );
    const work = spawnVqb(['work'], harnessEnv(h, { ...webhookEnv(), ...otel(collector.url, 'vqb-worker') }));
    children.push(api.child, work.child);
    const base = `http://127.0.0.1:${port}`;
    await answering(base, api);
    const [plate] = makePlates(1, 11);
    const batchId = await onePlate(base, plate!);
    await stop(api, work);

    const { byName } = plateTree(collector.spans(), batchId);
    expect(byName('vqb.plate')[0]!.service).toBe('vqb-api');
    expect(attr(byName('vqb.plate')[0]!, 'vqb.plate')).toBe(plate);
    // The wait is recorded by whichever process fed the plate to BullMQ (here the API's own feed
    // after its ingest); the job's steps by the worker.
    for (const name of ['vqb.create', 'vqb.poll', 'vqb.store'])
      expect(byName(name)[0]!.service, name).toBe('vqb-worker');
    // Still no key, token or result.
    const everything = collector.bodies.join('\n');
    const vehicle = fakeVehicle(plate!);
    for (const secret of [...(await secrets(h)), vehicle.brand, vehicle.model])
      expect(everything.includes(secret), `exported: ${secret}`).toBe(false);
  }, 90_000);

  it('with no OTEL_* exporter set, no part of the SDK, the exporter or an instrumentation is loaded', async () => {
    // Every module `vqb work --help` resolves: the worker's whole engine (its command module with
    // its imports; `vqb --help` alone loads no command).
    const loaded = (env: Record<string, string>) => modulesLoadedBy(['work', '--help'], env);
    const telemetry = /@opentelemetry\/(sdk|exporter|instrumentation)|bullmq-otel|@fastify\/otel/;
    const off = await loaded({});
    expect(off.some((url) => url.includes('/node_modules/bullmq/'))).toBe(true);
    expect(off.filter((url) => telemetry.test(url))).toEqual([]);
    // The same check sees them when tracing is on.
    const on = await loaded({ OTEL_TRACES_EXPORTER: 'console' });
    expect(on.some((url) => url.includes('@opentelemetry/sdk-node'))).toBe(true);
  }, 60_000);
});

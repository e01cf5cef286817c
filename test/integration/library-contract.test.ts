// One contract for the three front doors a program reads a batch through: the library's
// `batch.progress()`, the HTTP API's `GET /v1/batches/:id` and `vqb status <batch> --json` answer
// the same object (src/schemas/batch.ts, times in ISO 8601); and the library refuses an option it
// does not know, as the API does, before anything is stored or paid.
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isError, isVqbError, OptionsError } from '../../src/errors.js';
import { createVqb, type Vqb } from '../../src/index.js';
import { BatchView } from '../../src/schemas/batch.js';
import { createHttpApi } from '../../src/server.js';
import { type Harness, useHarness } from '../helpers/engine.js';
import { harnessEnv, rejection, runVqb } from '../helpers/process.js';

const TOKEN = 'contract-token-0123456789abcdef';
const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

const harness = useHarness('all');
let h: Harness;
let vqb: Vqb;
let app: FastifyInstance;
let base: string;

beforeAll(async () => {
  h = await harness.start({ label: 'contract', config: { VQ_API_TOKENS: TOKEN } });
  vqb = await createVqb({ config: h.config, logger: h.logs.logger });
  app = await createHttpApi({ services: h.services, config: h.config, logger: h.logs.logger, dashboard: false });
  await app.listen({ host: '127.0.0.1', port: 0 });
  base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
});

// Runs before the harness closes (vitest runs later hooks first).
afterAll(async () => {
  await app?.close();
  await vqb?.close();
});

async function cliJson(args: string[]): Promise<any> {
  // The CLI reads the same configuration as the library and the API (the batch view shows the account's rate).
  const { code, stdout, stderr } = await runVqb(args, harnessEnv(h, { VQ_RATE_LIMIT: h.config.rateLimit.text }));
  expect(stderr).toBe('');
  expect(code).toBe(0);
  return JSON.parse(stdout);
}

describe('one batch shape', () => {
  it('batch.progress(), GET /v1/batches/:id and `vqb status <id> --json` are the same object, times in ISO 8601', async () => {
    const batch = await vqb.enqueue(['ABC1D23', { plate: 'xyz-9876', customer: '42' }, 'not a plate'], {
      name: 'shape',
      metadata: { by: 'contract' },
      maxCreates: 10,
    });
    const finished = await batch.done({ timeoutMs: 30_000 });
    const fromLibrary = await batch.progress();
    expect(finished).toEqual(fromLibrary);

    const res = await fetch(`${base}/v1/batches/${batch.id}`, { headers: { authorization: `Bearer ${TOKEN}` } });
    expect(res.status).toBe(200);
    const fromApi = await res.json();
    const fromCli = await cliJson(['status', batch.id, '--json']);
    const listed = (await cliJson(['status', '--json'])).batches.batches.find((b: { id: string }) => b.id === batch.id);

    expect(fromApi).toEqual(fromLibrary);
    expect(fromCli).toEqual(fromLibrary);
    expect(listed).toEqual(fromLibrary);
    // Nothing beyond the published schema, at any depth (parsing drops unknown keys).
    expect(BatchView.parse(fromLibrary)).toEqual(fromLibrary);
    expect(fromLibrary).toMatchObject({
      id: batch.id,
      name: 'shape',
      source: 'library',
      account: 'default',
      priority: 'normal',
      finished: true,
      maxCreates: 10,
      metadata: { by: 'contract' },
      extraColumns: ['customer'],
      counts: { total: 3, enqueued: 2, done: 2, rejected: 1 },
      progress: { percent: 100, finished: 2, of: 2 },
      links: { self: `/v1/batches/${batch.id}` },
    });
    expect(fromLibrary.createdAt).toMatch(ISO);
    expect(fromLibrary.finishedAt).toMatch(ISO);
  });
});

describe('batch.done()', () => {
  it('hears the finish: with no read of the batch due for an hour, it resolves when the last plate lands', async () => {
    const batch = await vqb.enqueue(['DNE1A01', 'DNE1A02', 'DNE1A03'], { name: 'heard' });
    expect((await batch.progress()).finishedAt, 'not finished when the wait begins').toBeUndefined();
    // pollMs is only the re-read for a message lost to a reconnect: an hour here, so the script
    // that finished the batch published it, or this never resolves (the test's timeout fails it).
    const finished = await batch.done({ pollMs: 3_600_000 });
    expect(finished.counts.done).toBe(3);
    expect(finished.finishedAt).toBeDefined();
  });

  it('a batch that cannot finish (opened, never sealed): done() rejects after timeoutMs naming its counts, and at once on an aborted signal', async () => {
    await h.open('never-sealed');
    const batch = await vqb.batch('never-sealed');
    const late = await rejection(batch.done({ timeoutMs: 200 }));
    expect(late.message).toMatch(/^batch never-sealed not finished within 200 ms: \{.*"enqueued":0/);
    const stop = new AbortController();
    stop.abort(new Error('the caller gave up'));
    expect((await rejection(batch.done({ signal: stop.signal }))).message).toBe('the caller gave up');
  });
});

describe('the library refuses typos', () => {
  it('an unknown or mistyped option throws OptionsError (BAD_OPTIONS) naming it, and nothing is stored or paid', async () => {
    const batches = (await h.services.batchViews.list(0, 1)).total;
    const creates = h.sim.stats().creates;

    // @ts-expect-error `metadat` is not an option: a type error first, and at run time for JavaScript callers
    const typo = await rejection(vqb.enqueue(['DEF4G56'], { metadat: { by: 'me' } }));
    expect(isError(typo, OptionsError) && isVqbError(typo)).toBe(true);
    expect(typo).toMatchObject({ name: 'OptionsError', code: 'BAD_OPTIONS' });
    expect(typo.message).toMatch(/unknown option "metadat" \(the options: .*metadata/);

    const fromJavaScript = JSON.parse('{"weight": "heavy"}'); // untyped, as a JavaScript caller's
    const wrongType = await rejection(vqb.enqueue(['DEF4G56'], fromJavaScript));
    expect(wrongType).toMatchObject({ code: 'BAD_OPTIONS', message: expect.stringMatching(/^options\.weight: /) });
    // The API's rules, not looser ones: metadata is flat.
    expect(await rejection(vqb.enqueue(['DEF4G56'], { metadata: { nested: { a: 1 } } as never }))).toMatchObject({
      code: 'BAD_OPTIONS',
    });
    // @ts-expect-error the dry run checks the same options
    expect(await rejection(vqb.estimate(['DEF4G56'], { reuseWithin: 1_000 }))).toMatchObject({ code: 'BAD_OPTIONS' });

    expect((await h.services.batchViews.list(0, 1)).total).toBe(batches);
    expect(await h.idle()).toBe(true);
    expect(h.sim.stats().creates).toBe(creates);
  });
});

// The OpenAPI document as third-party tools use it: `redocly lint` finds nothing to say, and a
// client generated from the served document (openapi-typescript types + openapi-fetch) type-checks
// under `strict` and, against a real server with workers, submits a JSON batch and a CSV batch (a
// multipart upload) and reads typed results. Also: a CSV that a client JSON-encoded is refused,
// and the multipart upload's edges.
import { execFile } from 'node:child_process';
import { mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import type { FastifyInstance } from 'fastify';
import openapiTS, { astToString } from 'openapi-typescript';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHttpApi } from '../../src/server.js';
import { type Harness, useHarness } from '../helpers/engine.js';

const ROOT = resolve(import.meta.dirname, '../..');
const TOKEN = 'openapi-token-0123456789abcdef';
const BODY_LIMIT = 64 * 1024;
const run = promisify(execFile);

const harness = useHarness('all');
let h: Harness;
let app: FastifyInstance;
let base: string;
let tmp: string;
let doc: any;

beforeAll(async () => {
  h = await harness.start({
    label: 'openapi',
    config: { VQ_API_TOKENS: TOKEN, VQ_HTTP_BODY_LIMIT: String(BODY_LIMIT) },
  });
  app = await createHttpApi({ services: h.services, config: h.config, logger: h.logs.logger });
  await app.listen({ host: '127.0.0.1', port: 0 });
  base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  tmp = await mkdtemp(join(tmpdir(), 'vqb-openapi-'));
  // The generated client resolves openapi-fetch and @types/node from the project's packages.
  await symlink(join(ROOT, 'node_modules'), join(tmp, 'node_modules'), 'dir');
  doc = await (await fetch(`${base}/openapi.json`)).json();
});

// Runs before the harness closes (vitest runs later hooks first).
afterAll(async () => {
  await app?.close();
  if (tmp) await rm(tmp, { recursive: true, force: true });
});

function post(body: string | FormData, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`${base}/v1/batches`, {
    method: 'POST',
    headers: { authorization: `Bearer ${TOKEN}`, ...headers },
    body,
  });
}

async function expectError(res: Response, status: number, code: string): Promise<string> {
  const body = (await res.json()) as { statusCode: number; error: { code: string; message: string } };
  expect({ status: res.status, body }).toMatchObject({ status, body: { statusCode: status, error: { code } } });
  return body.error.message;
}

describe('the document', () => {
  it('passes `redocly lint` (recommended rules, redocly.yaml) with no error and no warning', async () => {
    const file = join(tmp, 'openapi.json');
    await writeFile(file, JSON.stringify(doc));
    const { stdout } = await run(
      process.execPath,
      [
        join(ROOT, 'node_modules/@redocly/cli/bin/cli.js'),
        'lint',
        '--config',
        join(ROOT, 'redocly.yaml'),
        '--format=json',
        file,
      ],
      {
        cwd: tmp,
        env: {
          PATH: process.env.PATH ?? '',
          HOME: tmp,
          REDOCLY_TELEMETRY: 'off',
          REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true',
          NO_COLOR: '1',
        },
      },
    );
    const report = JSON.parse(stdout) as {
      totals: { errors: number; warnings: number };
      problems: { ruleId: string; message: string }[];
    };
    expect(report.problems.map((p) => `${p.ruleId}: ${p.message}`)).toEqual([]);
    expect(report.totals).toMatchObject({ errors: 0, warnings: 0 });
  }, 60_000);

  it('names what a generator needs: servers, operationIds, named schemas behind $refs, typed results, open probes', () => {
    // Relative to where the document was fetched (VQ_PUBLIC_URL when set): never the request's Host.
    expect(doc.servers).toEqual([{ url: '/', description: expect.any(String) }]);
    const operations = Object.entries(doc.paths).flatMap(([path, item]) =>
      Object.entries(item as object).map(([method, op]) => ({ path, method, op })),
    );
    expect(Object.fromEntries(operations.map(({ path, method, op }) => [`${method} ${path}`, op.operationId]))).toEqual(
      {
        'get /healthz': 'getHealth',
        'get /openapi.json': 'getOpenApiDocument',
        'post /v1/batches': 'createBatch',
        'get /v1/batches': 'listBatches',
        'get /v1/batches/{id}': 'getBatch',
        'get /v1/batches/{id}/results': 'getBatchResults',
        'post /v1/batches/{id}/retry': 'retryBatch',
        'delete /v1/batches/{id}': 'deleteBatch',
        'get /v1/watches': 'listWatches',
        'post /v1/watches': 'createWatch',
        'get /v1/watches/{name}': 'getWatch',
        'patch /v1/watches/{name}': 'updateWatch',
        'delete /v1/watches/{name}': 'deleteWatch',
        'post /v1/watches/{name}/pause': 'pauseWatch',
        'post /v1/watches/{name}/resume': 'resumeWatch',
        'get /v1/watches/{name}/changes': 'getWatchChanges',
      },
    );
    expect(Object.keys(doc.components.schemas)).toEqual(
      expect.arrayContaining([
        'Batch',
        'BatchCounts',
        'Error',
        'ResultRow',
        'AccountLine',
        'CreateBatchBody',
        'CreateBatchForm',
        'CreateBatchReply',
        'BatchList',
        'Health',
      ]),
    );
    const json = (response: any) => response.content['application/json'].schema;
    const getBatch = doc.paths['/v1/batches/{id}'].get;
    expect(json(getBatch.responses['200'])).toEqual({ $ref: '#/components/schemas/Batch' });
    expect(json(getBatch.responses['404'])).toEqual({ $ref: '#/components/schemas/Error' });
    const deleteBatch = doc.paths['/v1/batches/{id}'].delete;
    expect(json(deleteBatch.responses['200'])).toEqual({ $ref: '#/components/schemas/DeleteReply' });
    expect(json(deleteBatch.responses['409'])).toEqual({ $ref: '#/components/schemas/Error' });
    expect(doc.components.schemas.Batch.properties.state).toMatchObject({ enum: ['running', 'finished', 'archived'] });
    expect(doc.components.schemas.Batch.properties.counts).toEqual({ $ref: '#/components/schemas/BatchCounts' });
    expect(doc.components.schemas.Batch.properties.createdAt).toMatchObject({ type: 'string', format: 'date-time' });
    expect(doc.components.schemas.BatchList.properties.batches.items).toEqual({ $ref: '#/components/schemas/Batch' });
    // The results: one ResultRow per JSONL line, the CSV as text.
    const results = doc.paths['/v1/batches/{id}/results'].get.responses['200'].content;
    expect(results['application/x-ndjson'].schema).toEqual({ $ref: '#/components/schemas/ResultRow' });
    expect(results['text/csv'].schema.type).toBe('string');
    expect(doc.components.schemas.ResultRow.properties).toMatchObject({
      status: { enum: ['done', 'failed', 'cancelled', 'rejected', 'duplicate', 'pending'] },
      input_columns: { type: 'object' },
    });
    // A CSV upload, as JSON's sibling; the JSON body is strict, as the server is.
    const create = doc.paths['/v1/batches'].post;
    expect(Object.keys(create.requestBody.content).sort()).toEqual([
      'application/json',
      'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet',
      'multipart/form-data',
      'text/csv',
    ]);
    expect(results['application/vnd.openxmlformats-officedocument.spreadsheetml.sheet'].schema).toMatchObject({
      type: 'string',
      format: 'binary',
    });
    expect(create.requestBody.content['multipart/form-data'].schema).toEqual({
      $ref: '#/components/schemas/CreateBatchForm',
    });
    expect(doc.components.schemas.CreateBatchForm).toMatchObject({
      required: ['file'],
      properties: { file: { type: 'string', format: 'binary' }, column: { type: 'string' } },
    });
    expect(doc.components.schemas.CreateBatchBody).toMatchObject({ additionalProperties: false, required: ['plates'] });
    // Probes and the document need no token; everything else does.
    expect(doc.paths['/healthz'].get.security).toEqual([]);
    expect(doc.paths['/openapi.json'].get.security).toEqual([]);
    expect(doc.security).toEqual([{ bearer: [] }, { apiKey: [] }]);
  });
});

/** The program a user would write with the generated types; its output is checked below. */
const CLIENT = `
import createClient from 'openapi-fetch';
import type { components, paths } from './api.js';

type Batch = components['schemas']['Batch'];
type ResultRow = components['schemas']['ResultRow'];

const client = createClient<paths>({ baseUrl: process.env.VQB_URL!, headers: { authorization: 'Bearer ' + process.env.VQB_TOKEN! } });

async function finished(id: string): Promise<Batch> {
  for (let i = 0; i < 300; i++) {
    const { data, error } = await client.GET('/v1/batches/{id}', { params: { path: { id } } });
    if (error) throw new Error(error.error.code + ': ' + error.error.message);
    if (data.finished) return data;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error('batch ' + id + ' did not finish');
}

async function results(id: string): Promise<ResultRow[]> {
  const { data, error } = await client.GET('/v1/batches/{id}/results', { params: { path: { id }, query: { format: 'jsonl' } }, parseAs: 'text' });
  if (error !== undefined || data === undefined) throw new Error('no results');
  return data.trim().split('\\n').map((line) => JSON.parse(line) as ResultRow);
}

const summary = (rows: ResultRow[]) => rows.map((r) => [r.plate, r.status, r.result?.status ?? null, r.input_columns['customer'] ?? null]);

// 1. A JSON batch.
const json = await client.POST('/v1/batches', {
  body: { plates: ['ABC1D23', { plate: 'xyz-9876', customer: '42' }], name: 'generated-json', priority: 'interactive', metadata: { by: 'openapi-fetch' } },
});
if (json.error) throw new Error(json.error.error.code);
if (!('batch' in json.data)) throw new Error('a dry run answered');
const jsonBatch = await finished(json.data.batch.id);

// 2. A CSV file, uploaded as multipart/form-data (openapi-fetch sends FormData as it is).
const csv = await client.POST('/v1/batches', {
  body: { file: 'placa;customer\\nDEF4G56;7\\nnot a plate;8\\n', column: 'placa' },
  bodySerializer(body) {
    const form = new FormData();
    if (typeof body !== 'object' || !('file' in body)) throw new Error('not a form');
    if (body.column !== undefined) form.append('column', body.column);
    form.append('file', new Blob([body.file], { type: 'text/csv' }), 'frota.csv');
    return form;
  },
});
if (csv.error) throw new Error(csv.error.error.code + ': ' + csv.error.error.message);
if (!('batch' in csv.data)) throw new Error('a dry run answered');
const csvBatch = await finished(csv.data.batch.id);

// 3. The same CSV as a text body: the default serializer JSON-encodes it, and the server says so.
const encoded = await client.POST('/v1/batches', { body: 'placa\\nABC1D23\\n', headers: { 'Content-Type': 'text/csv' } });

// @ts-expect-error an unknown option is a type error in the generated types too (the schema is strict)
const typo: components['schemas']['CreateBatchBody'] = { plates: ['ABC1D23'], metadat: {} };
void typo;

console.log(JSON.stringify({
  json: { id: jsonBatch.id, created: json.data.batch.created, createdAt: jsonBatch.createdAt, counts: jsonBatch.counts, rows: summary(await results(jsonBatch.id)) },
  csv: { id: csvBatch.id, name: csvBatch.name, counts: csvBatch.counts, rows: summary(await results(csvBatch.id)) },
  encoded: { status: encoded.response.status, code: encoded.error?.error.code ?? null },
}));
`;

describe('a client generated from the served document', () => {
  it('type-checks under strict, and submits a JSON batch and a multipart CSV batch and reads typed results', async () => {
    const types = astToString(await openapiTS(JSON.stringify(doc)));
    await writeFile(join(tmp, 'api.d.ts'), types);
    await writeFile(join(tmp, 'client.mts'), CLIENT);
    await writeFile(
      join(tmp, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          strict: true,
          noUncheckedIndexedAccess: true,
          exactOptionalPropertyTypes: true,
          skipLibCheck: false,
          module: 'nodenext',
          moduleResolution: 'nodenext',
          target: 'es2022',
          types: ['node'],
          outDir: 'build',
        },
        files: ['client.mts'],
      }),
    );
    const tsc = await run(process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', tmp]).catch(
      (err: { stdout: string }) => err,
    );
    expect(tsc.stdout, 'the client type-checks against the generated types').toBe('');

    const { stdout } = await run(process.execPath, [join(tmp, 'build/client.mjs')], {
      env: { PATH: process.env.PATH ?? '', VQB_URL: base, VQB_TOKEN: TOKEN },
      timeout: 60_000,
    });
    const out = JSON.parse(stdout);
    expect(out.json).toMatchObject({ created: true, counts: { total: 2, done: 2 } });
    expect(out.json.createdAt).toMatch(/^\d{4}-\d\d-\d\dT/);
    expect(out.json.rows).toEqual([
      ['ABC1D23', 'done', 'COMPLETED', ''],
      ['XYZ9876', 'done', 'COMPLETED', '42'],
    ]);
    // The upload is named after its file, as `vqb run` names a batch.
    expect(out.csv).toMatchObject({ name: 'frota.csv', counts: { total: 2, done: 1, rejected: 1 } });
    expect(out.csv.id).toMatch(/^frota-[0-9a-f]{12}$/);
    expect(out.csv.rows).toEqual([
      ['DEF4G56', 'done', 'COMPLETED', '7'],
      ['NOTAPLATE', 'rejected', null, '8'],
    ]);
    expect(out.encoded).toEqual({ status: 400, code: 'CSV_JSON_ENCODED' });
  }, 120_000);
});

describe('CSV uploads and CSVs sent as JSON strings', () => {
  const form = (parts: [string, string | Blob, string?][]): FormData => {
    const f = new FormData();
    for (const [name, value, fileName] of parts) {
      if (typeof value === 'string') f.append(name, value);
      else f.append(name, value, fileName);
    }
    return f;
  };
  const file = (text: string) => new Blob([text], { type: 'text/csv' });

  it('refuses a JSON-encoded CSV with 400 CSV_JSON_ENCODED, as text/csv, as JSON and as an uploaded file, and stores nothing', async () => {
    const before = (await h.services.batchViews.list(0, 1)).total;
    const encoded = JSON.stringify('placa\nABC1D23\nXYZ9876\n');
    const message = await expectError(await post(encoded, { 'content-type': 'text/csv' }), 400, 'CSV_JSON_ENCODED');
    expect(message).toMatch(/JSON string/);
    await expectError(await post(encoded, { 'content-type': 'application/json' }), 400, 'CSV_JSON_ENCODED');
    await expectError(await post(form([['file', file(encoded), 'frota.csv']])), 400, 'CSV_JSON_ENCODED');
    expect((await h.services.batchViews.list(0, 1)).total).toBe(before);
  });

  it('takes the file as a plain `file` field too, and options as fields; a dry run stores nothing', async () => {
    const res = await post(
      form([
        ['dryRun', 'true'],
        ['file', 'placa\nGHI7J89\n'],
      ]),
    );
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ dryRun: true, estimate: { rows: 1, plates: 1, creates: 1 } });
  });

  it("answers a form's mistakes in our error shape", async () => {
    const csv = file('placa\nABC1D23\n');
    const typo = await post(
      form([
        ['colum', 'placa'],
        ['file', csv, 'a.csv'],
      ]),
    );
    expect(await expectError(typo, 400, 'VALIDATION_FAILED')).toMatch(/colum/);
    expect(await expectError(await post(form([['name', 'x']])), 400, 'BAD_FORM')).toMatch(/`file`/);
    const columnLate = await post(
      form([
        ['file', csv, 'a.csv'],
        ['column', 'placa'],
      ]),
    );
    expect(await expectError(columnLate, 400, 'BAD_FORM')).toMatch(/before/);
    await expectError(await post(form([['other', csv, 'a.csv']])), 400, 'BAD_FORM');
    await expectError(
      await post(form([['file', file(`placa\n${'ABC1D23\n'.repeat(10_000)}`), 'big.csv']])),
      413,
      'PAYLOAD_TOO_LARGE',
    );
    await expectError(
      await post('--x\r\nbroken', { 'content-type': 'multipart/form-data; boundary=x' }),
      400,
      'BAD_FORM',
    );
    const retry = await fetch(`${base}/v1/batches/nope/retry`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}` },
      body: form([['recreate', 'true']]),
    });
    await expectError(retry, 415, 'UNSUPPORTED_MEDIA_TYPE');
  });
});

// Excel in and out, end to end: a workbook made by exceljs and one saved by LibreOffice
// (test/fixtures/xlsx/libreoffice.xlsx) through `vqb run`, the HTTP API (the .xlsx media type and
// multipart/form-data) and the drop folder, with real Redis, the simulator over HTTP and real
// workers. Each .xlsx export is opened with exceljs and compared with the CSV export of the same
// batch, cell by cell; formulas are never evaluated; each bad workbook is refused with its code
// and nothing stored.
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse } from 'csv-parse/sync';
import ExcelJS from 'exceljs';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createInboxWatcher, type InboxWatcher } from '../../src/producers/inbox.js';
import { createHttpApi } from '../../src/server.js';
import { escapeFormula } from '../../src/sinks/csv.js';
import { type Harness, makePlates, sleep, useHarness } from '../helpers/engine.js';
import { type Answer, apiCall, type CallOptions, expectError } from '../helpers/http.js';
import { harnessEnv, runVqb } from '../helpers/process.js';
import { exceljsWorkbook, sheetValues } from '../helpers/xlsx.js';

const TOKEN = 'svc-token-0123456789-SECRET-xlsx00';
const MAX_PLATES = 20;
const XLSX = 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet';
const FIXTURE = fileURLToPath(new URL('../fixtures/xlsx/libreoffice.xlsx', import.meta.url));

const harness = useHarness('all');
let h: Harness;
let dir: string;
let base: string;
let app: FastifyInstance;
let watcher: InboxWatcher | undefined;
let libreoffice: Buffer;
let made: Buffer;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'vqb-xlsx-'));
  h = await harness.start({
    label: 'xlsx',
    config: {
      VQ_API_TOKENS: TOKEN,
      VQ_HTTP_MAX_PLATES: String(MAX_PLATES),
      VQ_CSV_DELIMITER: ';',
      VQ_ROOT: join(dir, 'root'),
      VQ_INBOX_STABLE: '100ms',
    },
  });
  app = await createHttpApi({ services: h.services, config: h.config, logger: h.logs.logger });
  await app.listen({ host: '127.0.0.1', port: 0 });
  base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  libreoffice = await readFile(FIXTURE);
  made = await exceljsWorkbook();
});

afterAll(async () => {
  await watcher?.stop();
  await app?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

function call(path: string, options: CallOptions = {}): Promise<Answer> {
  return apiCall(base, TOKEN, path, options);
}

async function download(
  path: string,
): Promise<{ status: number; type: string | null; disposition: string | null; bytes: Buffer }> {
  const res = await fetch(`${base}${path}`, { headers: { authorization: `Bearer ${TOKEN}` } });
  return {
    status: res.status,
    type: res.headers.get('content-type'),
    disposition: res.headers.get('content-disposition'),
    bytes: Buffer.from(await res.arrayBuffer()),
  };
}

const csvRows = (text: string): string[][] =>
  parse(text, { bom: true, delimiter: ';', relax_column_count: true }) as string[][];

/**
 * The .xlsx export against the CSV export of the same batch: the same header and rows, each cell
 * the same value once typed (a number's digits, a date's instant, a flag's `true`, text that the
 * CSV escapes with "'" and the workbook keeps as plain text).
 */
function expectSameAsCsv(xlsxRows: unknown[][], csv: string[][]): void {
  expect(xlsxRows.length).toBe(csv.length);
  expect(xlsxRows[0]!.map((v) => escapeFormula(String(v)))).toEqual(csv[0]);
  xlsxRows.slice(1).forEach((cells, r) => {
    const expected = csv[r + 1]!;
    const width = Math.max(cells.length, expected.length);
    for (let c = 0; c < width; c++) {
      const value = cells[c] ?? null;
      const text = expected[c] ?? '';
      if (value instanceof Date) {
        expect(Math.abs(value.getTime() - Date.parse(text)), `row ${r + 1} col ${c + 1}`).toBeLessThanOrEqual(1);
      } else if (typeof value === 'string') {
        expect(escapeFormula(value), `row ${r + 1} col ${c + 1}`).toBe(text);
      } else {
        expect(value === null ? '' : String(value), `row ${r + 1} col ${c + 1}`).toBe(text);
      }
      expect(
        typeof value === 'object' && value !== null && !(value instanceof Date),
        'a formula or rich value in the export',
      ).toBe(false);
    }
  });
}

function column(rows: unknown[][], name: string): unknown[] {
  const i = rows[0]!.indexOf(name);
  expect(i).toBeGreaterThanOrEqual(0);
  return rows.slice(1).map((r) => r[i] ?? null);
}

async function batchCount(): Promise<number> {
  return (await h.services.batchViews.list(0, 1)).total;
}

async function waitFinished(id: string): Promise<void> {
  await h.waitForBatch(id, 30_000);
}

describe('vqb run file.xlsx', () => {
  const vqb = (args: string[]) => runVqb(args, harnessEnv(h, { VQ_CSV_DELIMITER: ';' }));

  it("runs the LibreOffice workbook: first sheet, plates as text, extra columns carried; the .xlsx export has the CSV export's rows", async () => {
    const file = join(dir, 'frota.xlsx');
    await writeFile(file, libreoffice);
    const run = await vqb(['run', file]);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    expect(run.stdout).toContain('plate column "Placa do veículo"');
    const batchId = /batch (frota-[0-9a-f]{12})/.exec(run.stdout)?.[1];
    expect(batchId).toBeDefined();
    const info = await h.services.batchViews.get(batchId!);
    expect(info.counts).toMatchObject({ total: 4, enqueued: 3, done: 3, rejected: 1 });

    const csv = csvRows(await readFile(join(h.config.outDir, `${batchId}.csv`), 'utf8'));
    const xlsx = await sheetValues(await readFile(join(h.config.outDir, `${batchId}.xlsx`)), 'results');
    expectSameAsCsv(xlsx, csv);
    expect(column(xlsx, 'input')).toEqual(['ABC1D23', 'xyz-9876', '0012345', 'LIB2O24']);
    expect(column(xlsx, 'row')).toEqual([1, 2, 3, 5]); // typed numbers; the sheet's blank row 5 is skipped and counted
    expect(column(xlsx, 'Código')).toEqual(['1234567', '42', '7', '8']); // integers as read, carried as text like any input column
    expect(column(xlsx, 'Dobro')).toEqual(['21', '6', '2', '4']); // LibreOffice's cached formula results
    expect(column(xlsx, 'Cliente')[1]).toBe('=cmd|calc'); // a text cell, not a formula
    expect(column(xlsx, 'finished_at')[0]).toBeInstanceOf(Date);
    expect(column(xlsx, 'status')).toEqual(['done', 'done', 'rejected', 'done']);
    const rejects = await sheetValues(await readFile(join(h.config.outDir, `${batchId}.xlsx`)), 'rejects');
    expect(rejects.slice(1).map((r) => r[1])).toEqual(['0012345']);

    // `vqb export --format xlsx` rebuilds the same workbook content.
    const rebuilt = await vqb(['export', batchId!, '--format', 'xlsx']);
    expect(rebuilt.code).toBe(0);
    expect(rebuilt.stdout.trim()).toBe(join(h.config.outDir, `${batchId}.xlsx`));
    expect(await sheetValues(await readFile(join(h.config.outDir, `${batchId}.xlsx`)), 'results')).toEqual(xlsx);
  }, 90_000);

  it('--sheet picks the second sheet, as another batch', async () => {
    const file = join(dir, 'frota2.xlsx');
    await writeFile(file, libreoffice);
    const run = await vqb(['run', file, '--sheet', 'Segunda']);
    expect(run.code).toBe(0);
    const batchId = /batch (frota2-[0-9a-f]{12})/.exec(run.stdout)?.[1];
    const rows = await sheetValues(await readFile(join(h.config.outDir, `${batchId}.xlsx`)));
    expect(column(rows, 'input')).toEqual(['SEC0N01', 'SEC0N02']);
    expect(column(rows, 'note')).toEqual(['second sheet', 'second sheet too']);
    const first = await vqb(['run', file, '--dry-run']);
    expect(first.stdout).not.toContain(batchId!);
  }, 90_000);

  it('runs the exceljs workbook: rich-text plates, numbers, cached formulas (never evaluated), dates', async () => {
    const file = join(dir, 'feita.xlsx');
    await writeFile(file, made);
    const run = await vqb(['run', file]);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    const batchId = /batch (feita-[0-9a-f]{12})/.exec(run.stdout)?.[1];
    const csv = csvRows(await readFile(join(h.config.outDir, `${batchId}.csv`), 'utf8'));
    const xlsx = await sheetValues(await readFile(join(h.config.outDir, `${batchId}.xlsx`)));
    expectSameAsCsv(xlsx, csv);
    expect(column(xlsx, 'plate')).toEqual(['EXC1A23', 'EXC2B34', 'EXC3456']);
    expect(column(xlsx, 'id')).toEqual(['1234567', '2', '4']);
    expect(column(xlsx, 'calculado')).toEqual(['20.5', '999', 'cached']); // 1+1 cached as 999: read, not computed
    expect(column(xlsx, 'data')).toEqual(['2024-03-01', '2024-03-01T10:30:00', null]); // an empty input cell stays empty
    expect(column(xlsx, 'nota')).toEqual(['=HYPERLINK("http://x")', '+55 11', '@user']);
  }, 90_000);

  it('refuses a file that is not a workbook, or a sheet that does not exist, with nothing stored', async () => {
    const before = await batchCount();
    const bad = join(dir, 'quebrado.xlsx');
    await writeFile(bad, 'placa\nABC1234\n');
    const broken = await vqb(['run', bad]);
    // A file that cannot be used is a command to fix: exit 2 (issue 36).
    expect(broken.code).toBe(2);
    expect(broken.stderr).toContain('not an Excel .xlsx workbook: the file is not a zip archive');
    const file = join(dir, 'frota3.xlsx');
    await writeFile(file, libreoffice);
    const noSheet = await vqb(['run', file, '--sheet', 'Terceira']);
    expect(noSheet.code).toBe(2);
    expect(noSheet.stderr).toContain('no sheet named "Terceira"; the workbook has "Frota", "Segunda"');
    expect(await batchCount()).toBe(before);
  }, 60_000);
});

describe('POST /v1/batches with a workbook', () => {
  it("takes the .xlsx media type; ?dryRun estimates; results?format=xlsx has the CSV results' rows", async () => {
    const creates = h.sim.stats().creates;
    const dry = await call('/v1/batches?dryRun=true&name=api-lo', { body: libreoffice, type: XLSX });
    expect(dry.status).toBe(200);
    expect(dry.json.estimate).toMatchObject({ rows: 4, plates: 3, rejected: 1 });
    expect(h.sim.stats().creates).toBe(creates);

    const posted = await call('/v1/batches?name=api-lo', { body: libreoffice, type: XLSX });
    expect(posted.status).toBe(202);
    expect(posted.json.batch.counts).toMatchObject({ total: 4, enqueued: 3, rejected: 1 });
    expect(posted.json.rejects).toEqual([expect.objectContaining({ row: 3, input: '0012345' })]);
    const id = posted.json.batch.id as string;
    await waitFinished(id);

    const got = await download(`/v1/batches/${id}/results?format=xlsx`);
    expect(got.status).toBe(200);
    expect(got.type).toBe(XLSX);
    expect(got.disposition).toBe(`attachment; filename="${id}.xlsx"`);
    const csv = await call(`/v1/batches/${id}/results?format=csv`);
    const xlsx = await sheetValues(got.bytes, 'results');
    expectSameAsCsv(xlsx, csvRows(csv.text));
    expect(column(xlsx, 'Cliente')).toEqual([
      'Ação Ltda',
      '=cmd|calc',
      'número como texto',
      'depois da linha em branco',
    ]);
  }, 60_000);

  it('takes a form upload, the sheet as a field, and tells a workbook by its bytes when the name and type say nothing', async () => {
    const form = new FormData();
    form.append('sheet', 'Segunda');
    form.append('file', new Blob([new Uint8Array(libreoffice)], { type: XLSX }), 'frota.xlsx');
    const res = await fetch(`${base}/v1/batches`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}` },
      body: form,
    });
    const body = (await res.json()) as any;
    expect(res.status).toBe(202);
    expect(body.batch.counts).toMatchObject({ total: 2, enqueued: 2 });

    const anonymous = new FormData();
    anonymous.append('file', new Blob([new Uint8Array(made)], { type: 'application/octet-stream' }), 'upload.bin');
    const res2 = await fetch(`${base}/v1/batches`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}` },
      body: anonymous,
    });
    const body2 = (await res2.json()) as any;
    expect(res2.status).toBe(202);
    expect(body2.batch.counts).toMatchObject({ total: 3, enqueued: 3 });
    await waitFinished(body.batch.id);
    await waitFinished(body2.batch.id);
    const rows = await sheetValues((await download(`/v1/batches/${body2.batch.id}/results?format=xlsx`)).bytes);
    expect(column(rows, 'calculado')).toEqual(['20.5', '999', 'cached']);
  }, 60_000);

  it('refuses each bad workbook in our error shape, storing nothing', async () => {
    const before = await batchCount();
    expectError(await call('/v1/batches', { body: 'placa\nABC1234\n', type: XLSX }), 422, 'XLSX_INVALID');
    expectError(await call('/v1/batches?sheet=Nope', { body: libreoffice, type: XLSX }), 422, 'XLSX_SHEET_NOT_FOUND');
    const empty = new ExcelJS.Workbook();
    empty.addWorksheet('vazia');
    expectError(
      await call('/v1/batches', { body: Buffer.from(await empty.xlsx.writeBuffer()), type: XLSX }),
      422,
      'XLSX_EMPTY',
    );
    const many = new ExcelJS.Workbook();
    many.addWorksheet('muitas').addRows([['placa'], ...makePlates(MAX_PLATES + 1).map((p) => [p])]);
    expectError(
      await call('/v1/batches', { body: Buffer.from(await many.xlsx.writeBuffer()), type: XLSX }),
      413,
      'TOO_MANY_PLATES',
    );
    const form = new FormData();
    form.append('file', new Blob([new Uint8Array(libreoffice)]), 'frota.xlsx');
    form.append('sheet', 'Segunda');
    expectError(
      await fetch(`${base}/v1/batches`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TOKEN}` },
        body: form,
      }).then(asAnswer),
      400,
      'BAD_FORM',
    );
    expect(await batchCount()).toBe(before);
  }, 60_000);
});

describe('the drop folder', () => {
  it('takes an .xlsx beside the CSVs, writes an .xlsx export too, and fails a broken one with a report', async () => {
    watcher = createInboxWatcher({ services: h.services, config: h.config, logger: h.logs.logger });
    const root = join(dir, 'root');
    await watcher.scanOnce(); // creates the folders
    await writeFile(join(root, 'inbox', 'frota.xlsx'), made);
    await writeFile(join(root, 'inbox', 'quebrado.xlsx'), Buffer.from('PK\x03\x04 not really a zip', 'latin1'));
    const deadline = Date.now() + 30_000;
    let out: string[] = [];
    while (!out.some((f) => f.endsWith('.xlsx'))) {
      if (Date.now() > deadline) throw new Error(`no .xlsx in outbox/: ${out.join(', ')}`);
      await sleep(100);
      await watcher.scanOnce();
      out = await readdir(join(root, 'outbox')).catch(() => []);
    }
    const id = out.find((f) => f.endsWith('.xlsx'))!.replace(/\.xlsx$/, '');
    expect(id).toMatch(/^frota-[0-9a-f]{12}$/);
    const csv = csvRows(await readFile(join(root, 'outbox', `${id}.csv`), 'utf8'));
    const xlsx = await sheetValues(await readFile(join(root, 'outbox', `${id}.xlsx`)));
    expectSameAsCsv(xlsx, csv);
    expect(column(xlsx, 'status')).toEqual(['done', 'done', 'done']);
    const failed = await readdir(join(root, 'failed'));
    expect(failed).toEqual(['quebrado.xlsx', 'quebrado.xlsx.error.txt']);
    expect(await readFile(join(root, 'failed', 'quebrado.xlsx.error.txt'), 'utf8')).toContain('[XLSX_INVALID]');
  }, 60_000);
});

async function asAnswer(res: Response): Promise<Answer> {
  const text = await res.text();
  return { status: res.status, headers: res.headers, text, json: JSON.parse(text) };
}

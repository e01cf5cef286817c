// The .xlsx export, as written by the file sink: the CSV's columns and rows as typed cells, text
// never a formula, rejects on their own sheet.
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'csv-parse/sync';
import JSZip from 'jszip';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { FileSink } from '../../src/sinks/file-sink.js';
import type { ExportRow, ExportSource } from '../../src/sinks/types.js';
import { sheetValues } from '../helpers/xlsx.js';

const T0 = Date.UTC(2024, 4, 1, 12, 0, 0);
const ROWS: ExportRow[] = [
  {
    row: 1,
    input: 'abc-1234',
    plate: 'ABC1234',
    status: 'done',
    queryId: 'q-1',
    result: {
      veiculo: { marca: 'Fiat', ano: 2010, restricoes: ['furto'] },
      saldo: -2,
      ativo: true,
      formula: '=1+1',
      nulo: null,
    },
    enqueuedAt: T0,
    createdAt: T0 + 1000,
    finishedAt: T0 + 5000,
    requests: 3,
    extra: { obs: "=cmd|' /C calc'!A0", codigo: '0012' },
  },
  {
    row: 3,
    input: '@SUM(A1)',
    plate: '',
    status: 'rejected',
    error: { code: 'EMPTY', message: 'no plate' },
    possibleDuplicate: true,
    extra: { obs: '+55', codigo: '' },
  },
];

const source: ExportSource = {
  batchId: 'b-x',
  extraColumns: ['obs', 'codigo'],
  async *rows() {
    yield* ROWS;
  },
  async *rejects() {
    yield { row: 3, input: '@SUM(A1)', reason: 'EMPTY', message: 'no plate' };
  },
};

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'vqb-xlsx-sink-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

it('writes the CSV layout as typed cells: numbers, dates, booleans, text (never a formula)', async () => {
  const result = await new FileSink({ dir, csvDelimiter: ';' }).write(source, ['csv', 'xlsx']);
  expect(result.files.xlsx).toBe(join(dir, 'b-x.xlsx'));
  expect(result.rows).toBe(2);
  const bytes = await readFile(join(dir, 'b-x.xlsx'));
  const rows = await sheetValues(bytes, 'results');
  const csv = parse(await readFile(join(dir, 'b-x.csv'), 'utf8'), { bom: true, delimiter: ';' }) as string[][];
  expect(rows[0]).toEqual(csv[0]!.map((name) => name.replace(/^'/, '')));
  const at = (name: string) => rows[0]!.indexOf(name);
  const first = rows[1]!;
  expect(first[at('row')]).toBe(1);
  expect(first[at('requests')]).toBe(3);
  expect(first[at('finished_at')]).toEqual(new Date(T0 + 5000));
  expect(first[at('result.veiculo.ano')]).toBe(2010);
  expect(first[at('result.saldo')]).toBe(-2);
  expect(first[at('result.ativo')]).toBe(true);
  expect(first[at('result.veiculo.restricoes')]).toBe('["furto"]');
  expect(first[at('result.formula')]).toBe('=1+1');
  expect(first[at('obs')]).toBe("=cmd|' /C calc'!A0");
  expect(first[at('codigo')]).toBe('0012');
  const second = rows[2]!;
  expect(second[at('input')]).toBe('@SUM(A1)');
  expect(second[at('possible_duplicate')]).toBe(true);
  expect(second[at('obs')]).toBe('+55');
  expect(await sheetValues(bytes, 'rejects')).toEqual([
    ['row', 'input', 'reason', 'message'],
    [3, '@SUM(A1)', 'EMPTY', 'no plate'],
  ]);
  // No formula element anywhere in the workbook's sheets.
  const zip = await JSZip.loadAsync(bytes);
  for (const name of Object.keys(zip.files).filter((n) => n.startsWith('xl/worksheets/'))) {
    expect(await zip.file(name)!.async('string'), name).not.toMatch(/<f[ >]/);
  }
});

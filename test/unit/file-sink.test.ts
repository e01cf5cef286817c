import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'csv-parse/sync';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { isVqbError } from '../../src/errors.js';
import { BASE_COLUMNS } from '../../src/sinks/csv.js';
import { FileSink, type FileSinkFs, nodeFs } from '../../src/sinks/file-sink.js';
import type { ExportRow, ExportSource, RejectRow } from '../../src/sinks/types.js';

const T0 = Date.UTC(2024, 4, 1, 12, 0, 0);
const CALC = "=cmd|' /C calc'!A0";

const ROWS: ExportRow[] = [
  {
    row: 1,
    input: 'abc-1234',
    plate: 'ABC1234',
    status: 'done',
    queryId: 'q-1',
    result: {
      veiculo: { marca: 'Fiat', modelo: 'Uno', municipio: 'São Paulo', ano: 2010, restricoes: ['alienação', 'furto'] },
      formula: '+1',
      saldo: -2,
      nulo: null,
    },
    enqueuedAt: T0,
    createdAt: T0 + 1000,
    finishedAt: T0 + 5000,
    requests: 3,
    extra: { Cidade: 'São Paulo', status: 'ativo', obs: CALC },
  },
  {
    row: 2,
    input: 'DEF5G67',
    plate: 'DEF5G67',
    status: 'failed',
    queryId: 'q-2',
    error: { code: 'UPSTREAM_NOT_FOUND', message: 'plate not found' },
    possibleDuplicate: true,
    enqueuedAt: T0,
    finishedAt: T0 + 2000,
    requests: 1,
    extra: { Cidade: 'Maceió', status: '@SUM(A1)', obs: '-2' },
  },
  {
    row: 4,
    input: '=1+1',
    plate: '11',
    status: 'rejected',
    error: { code: 'BAD_LENGTH', message: 'plates have 7 characters, this has 2' },
    extra: { Cidade: '', status: '', obs: '' },
  },
  {
    row: 5,
    input: 'ABC 1234',
    plate: 'ABC1234',
    status: 'duplicate',
    duplicateOf: 1,
    queryId: 'q-1',
    result: {
      veiculo: { marca: 'Fiat', modelo: 'Uno', municipio: 'São Paulo', ano: 2010, restricoes: [] },
      formula: '+1',
      saldo: -2,
      nulo: null,
    },
    extra: { Cidade: 'Rio', status: 'x', obs: 'multi\nlinha, com "aspas"' },
  },
  {
    row: 6,
    input: 'ABC1C34',
    plate: 'ABC1C34',
    status: 'pending',
    sameVehicleAs: 'ABC1234',
    enqueuedAt: T0,
    extra: { Cidade: 'Niterói', status: '', obs: '' },
  },
];

const REJECTS: RejectRow[] = [
  { row: 4, input: '=1+1', reason: 'BAD_LENGTH', message: 'plates have 7 characters, this has 2' },
];

function sourceOf(rows: ExportRow[], rejects: RejectRow[] = REJECTS, batchId = 'b-1'): ExportSource {
  return {
    batchId,
    extraColumns: ['Cidade', 'status', 'obs'],
    async *rows() {
      yield* rows;
    },
    async *rejects() {
      yield* rejects;
    },
  };
}

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'vqb-sink-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const BOM = '\ufeff';
const readCsv = async (path: string) =>
  parse(await readFile(path, 'utf8'), { bom: true, relax_column_count: true }) as string[][];

describe('FileSink', () => {
  it('writes JSONL with keys in a fixed order and ISO times', async () => {
    const result = await new FileSink({ dir }).write(sourceOf(ROWS), ['jsonl']);
    expect(result).toEqual({ files: { jsonl: join(dir, 'b-1.jsonl') }, rows: 5 });
    const text = await readFile(join(dir, 'b-1.jsonl'), 'utf8');
    const lines = text.split('\n');
    expect(lines).toHaveLength(6);
    expect(lines[5]).toBe('');
    const first = JSON.parse(lines[0] ?? '') as Record<string, unknown>;
    expect(Object.keys(first)).toEqual([
      'row',
      'input',
      'plate',
      'status',
      'queryId',
      'result',
      'enqueuedAt',
      'createdAt',
      'finishedAt',
      'requests',
      'input_columns',
    ]);
    expect(first).toMatchObject({
      enqueuedAt: '2024-05-01T12:00:00.000Z',
      finishedAt: '2024-05-01T12:00:05.000Z',
      input_columns: { Cidade: 'São Paulo', status: 'ativo', obs: CALC },
    });
    expect(lines[1]).toBe(
      '{"row":2,"input":"DEF5G67","plate":"DEF5G67","status":"failed","queryId":"q-2","possibleDuplicate":true,' +
        '"error":{"code":"UPSTREAM_NOT_FOUND","message":"plate not found"},"enqueuedAt":"2024-05-01T12:00:00.000Z",' +
        '"finishedAt":"2024-05-01T12:00:02.000Z","requests":1,"input_columns":{"Cidade":"Maceió","status":"@SUM(A1)","obs":"-2"}}',
    );
    expect(JSON.parse(lines[3] ?? '')).toMatchObject({ status: 'duplicate', duplicateOf: 1 });
    expect(JSON.parse(lines[4] ?? '')).toMatchObject({ status: 'pending', sameVehicleAs: 'ABC1234' });
    // No rejects file without CSV.
    expect(await readdir(dir)).toEqual(['b-1.jsonl']);
  });

  it('writes an Excel-friendly CSV: BOM, CRLF, stable columns, flattened result', async () => {
    const result = await new FileSink({ dir }).write(sourceOf(ROWS), ['csv', 'jsonl']);
    expect(result).toEqual({
      files: { jsonl: join(dir, 'b-1.jsonl'), csv: join(dir, 'b-1.csv'), rejects: join(dir, 'b-1.rejects.csv') },
      rows: 5,
    });
    const raw = await readFile(join(dir, 'b-1.csv'), 'utf8');
    expect(raw.startsWith(BOM)).toBe(true);
    expect(raw.endsWith('\r\n')).toBe(true);
    // Every record ends in CRLF; the only bare \n is inside the quoted multi-line cell.
    expect(raw.replace(/\r\n/g, '').split('\n')).toHaveLength(2);

    const [header, ...records] = await readCsv(join(dir, 'b-1.csv'));
    expect(header).toEqual([
      ...BASE_COLUMNS,
      'Cidade',
      'input_status',
      'obs',
      'result.veiculo.marca',
      'result.veiculo.modelo',
      'result.veiculo.municipio',
      'result.veiculo.ano',
      'result.veiculo.restricoes',
      'result.formula',
      'result.saldo',
      'result.nulo',
    ]);
    expect(records).toHaveLength(5);
    const byName = (record: string[] | undefined) =>
      Object.fromEntries((header ?? []).map((name, i) => [name, record?.[i]]));
    expect(byName(records[0])).toMatchObject({
      row: '1',
      input: 'abc-1234',
      plate: 'ABC1234',
      status: 'done',
      query_id: 'q-1',
      requests: '3',
      enqueued_at: '2024-05-01T12:00:00.000Z',
      created_at: '2024-05-01T12:00:01.000Z',
      finished_at: '2024-05-01T12:00:05.000Z',
      Cidade: 'São Paulo',
      input_status: 'ativo',
      obs: `'${CALC}`,
      'result.veiculo.municipio': 'São Paulo',
      'result.veiculo.ano': '2010',
      'result.veiculo.restricoes': '["alienação","furto"]',
      'result.formula': "'+1",
      'result.saldo': '-2', // a number, not a formula
      'result.nulo': '',
    });
    expect(byName(records[1])).toMatchObject({
      status: 'failed',
      error_code: 'UPSTREAM_NOT_FOUND',
      error_message: 'plate not found',
      possible_duplicate: 'true',
      input_status: "'@SUM(A1)",
      obs: "'-2",
      'result.veiculo.marca': '',
    });
    expect(byName(records[2])).toMatchObject({
      row: '4',
      input: "'=1+1",
      status: 'rejected',
      error_code: 'BAD_LENGTH',
    });
    expect(byName(records[3])).toMatchObject({
      status: 'duplicate',
      duplicate_of: '1',
      'result.veiculo.restricoes': '[]',
      obs: 'multi\nlinha, com "aspas"',
    });
    expect(byName(records[4])).toMatchObject({
      status: 'pending',
      same_vehicle_as: 'ABC1234',
      Cidade: 'Niterói',
      finished_at: '',
    });
    // No cell of the file starts a formula (numbers aside).
    const saldo = header?.indexOf('result.saldo');
    for (const record of [header ?? [], ...records]) {
      for (const [i, cell] of record.entries()) if (i !== saldo) expect(cell).not.toMatch(/^(?:[\t\r]|\s*[=+\-@])/);
    }

    const rejects = await readFile(join(dir, 'b-1.rejects.csv'), 'utf8');
    expect(rejects).toBe(
      `${BOM}row,input,reason,message\r\n4,'=1+1,BAD_LENGTH,"plates have 7 characters, this has 2"\r\n`,
    );
  });

  it('writes the rejects file with its header even when there are none', async () => {
    await new FileSink({ dir }).write(sourceOf(ROWS, []), ['csv']);
    expect(await readFile(join(dir, 'b-1.rejects.csv'), 'utf8')).toBe(`${BOM}row,input,reason,message\r\n`);
    expect((await readdir(dir)).sort()).toEqual(['b-1.csv', 'b-1.rejects.csv']);
  });

  it('uses `;` when asked (pt-BR Excel)', async () => {
    await new FileSink({ dir, csvDelimiter: ';' }).write(sourceOf(ROWS), ['csv']);
    const raw = await readFile(join(dir, 'b-1.csv'), 'utf8');
    expect(raw.slice(1, raw.indexOf('\r\n'))).toMatch(/^row;input;plate;status;query_id;/);
    expect(raw).toContain(';São Paulo;');
  });

  it('gives byte-identical files when rebuilt from the same rows', async () => {
    const sink = new FileSink({ dir });
    await sink.write(sourceOf(ROWS), ['csv', 'jsonl']);
    const first = await Promise.all(['b-1.csv', 'b-1.jsonl', 'b-1.rejects.csv'].map((f) => readFile(join(dir, f))));
    await new FileSink({ dir }).write(sourceOf(ROWS), ['jsonl', 'csv']);
    const second = await Promise.all(['b-1.csv', 'b-1.jsonl', 'b-1.rejects.csv'].map((f) => readFile(join(dir, f))));
    second.forEach((bytes, i) => {
      expect(bytes.equals(first[i] as Buffer)).toBe(true);
    });
  });

  it('keeps the previous export and leaves no temp file when the rows fail midway', async () => {
    const sink = new FileSink({ dir });
    await sink.write(sourceOf(ROWS), ['csv', 'jsonl']);
    const before = await Promise.all(['b-1.csv', 'b-1.jsonl'].map((f) => readFile(join(dir, f))));
    const failing: ExportSource = {
      ...sourceOf(ROWS),
      async *rows() {
        for (let i = 0; i < 20_000; i++) yield { ...ROWS[0], row: i + 1 } as ExportRow;
        throw new Error('redis went away');
      },
    };
    for (const formats of [['jsonl'], ['csv'], ['jsonl', 'csv']] as const) {
      await expect(sink.write(failing, formats)).rejects.toThrow('redis went away');
      expect((await readdir(dir)).sort()).toEqual(['b-1.csv', 'b-1.jsonl', 'b-1.rejects.csv']);
    }
    const after = await Promise.all(['b-1.csv', 'b-1.jsonl'].map((f) => readFile(join(dir, f))));
    after.forEach((bytes, i) => {
      expect(bytes.equals(before[i] as Buffer)).toBe(true);
    });
  });

  it('publishes nothing if a file cannot be written, and removes its temp files', async () => {
    await writeFile(join(dir, 'b-1.jsonl'), 'old\n');
    const renames: string[] = [];
    const fs: FileSinkFs = {
      ...nodeFs,
      async rename(_from, to) {
        renames.push(to);
        throw new Error('disk full');
      },
    };
    await expect(new FileSink({ dir, fs }).write(sourceOf(ROWS), ['jsonl', 'csv'])).rejects.toThrow('disk full');
    expect(renames).toHaveLength(1);
    expect(await readdir(dir)).toEqual(['b-1.jsonl']);
    expect(await readFile(join(dir, 'b-1.jsonl'), 'utf8')).toBe('old\n');
  });

  it('rewrites the CSV when rows gain result columns between passes (a running batch)', async () => {
    let pass = 0;
    const growing: ExportSource = {
      ...sourceOf(ROWS),
      async *rows() {
        pass++;
        yield { ...ROWS[4], result: pass === 1 ? undefined : { late: 'yes' } } as ExportRow;
      },
    };
    const result = await new FileSink({ dir }).write(growing, ['csv']);
    expect(result.rows).toBe(1);
    const [header, record] = await readCsv(join(dir, 'b-1.csv'));
    expect(header?.at(-1)).toBe('result.late');
    expect(record?.at(-1)).toBe('yes');
  });

  it('gives up, CSV or .xlsx, when rows gain columns on every pass, and publishes nothing', async () => {
    for (const format of ['csv', 'xlsx'] as const) {
      let pass = 0;
      const restless: ExportSource = {
        ...sourceOf(ROWS),
        async *rows() {
          pass++;
          yield { ...ROWS[4], result: { [`c${pass}`]: 'x' } } as ExportRow;
        },
      };
      const err = await new FileSink({ dir }).write(restless, [format]).catch((e: unknown) => e);
      expect(isVqbError(err) && err.code).toBe('EXPORT_SOURCE_UNSTABLE');
      expect(pass).toBe(4); // one pass to learn, three writes
      expect(await readdir(dir)).toEqual([]);
    }
  });

  it('refuses a batch id that is not a plain file name', async () => {
    for (const batchId of ['../escape', '.hidden', 'a/b', '']) {
      const err = await new FileSink({ dir }).write(sourceOf(ROWS, [], batchId), ['csv']).catch((e: unknown) => e);
      expect(isVqbError(err) && err.code).toBe('EXPORT_BAD_BATCH_ID');
    }
  });

  it('exports 100,000 rows in bounded memory', async () => {
    const total = 100_000;
    const before = process.memoryUsage().rss;
    let peak = before;
    const big: ExportSource = {
      batchId: 'big',
      extraColumns: ['Cidade'],
      async *rows() {
        for (let i = 1; i <= total; i++) {
          if (i % 5000 === 0) peak = Math.max(peak, process.memoryUsage().rss);
          yield {
            row: i,
            input: `ABC${String(i % 10_000).padStart(4, '0')}`,
            plate: `ABC${String(i % 10_000).padStart(4, '0')}`,
            status: 'done',
            queryId: `q-${i}`,
            result: {
              veiculo: { marca: 'Fiat', modelo: 'Uno Mille Economy', ano: 2000 + (i % 20), cor: 'Prata' },
              situacao: 'Em circulação',
            },
            finishedAt: T0 + i,
            requests: 2,
            extra: { Cidade: 'São Paulo' },
          };
        }
      },
      async *rejects() {},
    };
    const started = Date.now();
    const result = await new FileSink({ dir }).write(big, ['jsonl', 'csv']);
    const deltaMb = (peak - before) / 2 ** 20;
    console.log(`100,000-row export in ${Date.now() - started} ms, peak RSS +${deltaMb.toFixed(1)} MB`);
    expect(result.rows).toBe(total);
    const csv = await readFile(join(dir, 'big.csv'), 'utf8');
    expect(csv.split('\r\n')).toHaveLength(total + 2);
    expect(deltaMb).toBeLessThan(150);
  });
});

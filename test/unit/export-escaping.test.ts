// Issue 15, defect 9: what the exports do with numbers, odd column names and formula-looking cells.
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'csv-parse/sync';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { toExportRow } from '../../src/sinks/batch-source.js';
import { escapeFormula } from '../../src/sinks/csv.js';
import { FileSink } from '../../src/sinks/file-sink.js';
import type { ExportRow, ExportSource, RejectRow } from '../../src/sinks/types.js';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'vqb-escape-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

function sourceOf(rows: ExportRow[], extraColumns: string[], rejects: RejectRow[] = []): ExportSource {
  return {
    batchId: 'b',
    extraColumns,
    async *rows() {
      yield* rows;
    },
    async *rejects() {
      yield* rejects;
    },
  };
}

/** The CSV as {column: cell} per record, through a real CSV parser. */
async function csvRecords(path: string): Promise<{ header: string[]; records: Record<string, string>[] }> {
  const [header = [], ...rows] = parse(await readFile(path, 'utf8'), { bom: true }) as string[][];
  return { header, records: rows.map((cells) => Object.fromEntries(header.map((name, i) => [name, cells[i] ?? '']))) };
}

type Result = NonNullable<ExportRow['result']>;
const done = (extra: Record<string, string>, result: unknown): ExportRow => ({
  row: 1,
  input: 'ABC1234',
  plate: 'ABC1234',
  status: 'done',
  queryId: 'q-1',
  result: result as Result,
  extra,
});

describe('export escaping', () => {
  it('writes numbers from upstream as numbers, negative ones included', async () => {
    const result = JSON.parse(
      '{"saldo": -5, "multa": -12.5, "tiny": -1e-7, "zero": 0, "ano": 2010, "texto": "-5", "conta": "-2+3"}',
    ) as unknown;
    await new FileSink({ dir }).write(sourceOf([done({}, result)], []), ['csv']);
    const { records } = await csvRecords(join(dir, 'b.csv'));
    expect(records[0]).toMatchObject({
      'result.saldo': '-5',
      'result.multa': '-12.5',
      'result.tiny': '-1e-7',
      'result.zero': '0',
      'result.ano': '2010',
      // Strings are text: one that starts like a formula is escaped, whatever follows.
      'result.texto': "'-5",
      'result.conta': "'-2+3",
    });
  });

  it('keeps a column named __proto__, as an input column and as a result field', async () => {
    const stored = {
      row: 1,
      input: 'ABC1234',
      extra: ['cliente 1', 'proto value', 'ok'],
      kind: 'queued' as const,
      plate: 'ABC1234',
    };
    const row = toExportRow(stored, ['cliente', '__proto__', 'constructor'], {
      status: 'done',
      queryId: 'q-1',
      result: JSON.parse('{"__proto__": {"x": "nested"}, "constructor": "c", "marca": "Fiat"}'),
      finishedAt: 1,
      requests: 2,
    } as never);
    expect(Object.keys(row.extra)).toEqual(['cliente', '__proto__', 'constructor']);

    await new FileSink({ dir }).write(sourceOf([row], ['cliente', '__proto__', 'constructor']), ['csv', 'jsonl']);
    const { header, records } = await csvRecords(join(dir, 'b.csv'));
    expect(header).toContain('__proto__');
    expect(header).toContain('result.__proto__.x');
    expect(records[0]).toMatchObject({
      cliente: 'cliente 1',
      __proto__: 'proto value',
      constructor: 'ok',
      'result.__proto__.x': 'nested',
      'result.constructor': 'c',
      'result.marca': 'Fiat',
    });
    const line = (await readFile(join(dir, 'b.jsonl'), 'utf8')).trimEnd();
    expect(line).toContain('"input_columns":{"cliente":"cliente 1","__proto__":"proto value","constructor":"ok"}');
    expect(line).toContain('"result":{"__proto__":{"x":"nested"},"constructor":"c","marca":"Fiat"}');
  });

  it('escapes cells that start a formula after spaces, tabs, CR or LF', async () => {
    const cells: Record<string, string> = {
      space: ' =1+1',
      spaces: '   @SUM(A1)',
      lf: '\n=cmd|calc',
      crlf: '\r\n+1',
      tab: '\t-2',
      tabEq: '\t=HYPERLINK("http://x")',
      cr: '\r=1',
      plain: 'São Paulo',
      inner: 'a=b+c',
      lead: '  texto',
      empty: '',
    };
    const names = Object.keys(cells);
    const rejects: RejectRow[] = [{ row: 2, input: ' =1+1', reason: 'BAD_LENGTH', message: '\n@x' }];
    await new FileSink({ dir }).write(sourceOf([done(cells, { obs: ' =1+1', lista: ['=x'] })], names, rejects), [
      'csv',
    ]);
    const { records } = await csvRecords(join(dir, 'b.csv'));
    expect(records[0]).toMatchObject({
      space: "' =1+1",
      spaces: "'   @SUM(A1)",
      lf: "'\n=cmd|calc",
      crlf: "'\r\n+1",
      tab: "'\t-2",
      tabEq: `'\t=HYPERLINK("http://x")`,
      cr: "'\r=1",
      plain: 'São Paulo',
      inner: 'a=b+c',
      lead: '  texto',
      empty: '',
      'result.obs': "' =1+1",
      'result.lista': '["=x"]',
    });
    const { records: rejected } = await csvRecords(join(dir, 'b.rejects.csv'));
    expect(rejected[0]).toEqual({ row: '2', input: "' =1+1", reason: 'BAD_LENGTH', message: "'\n@x" });
  });

  it('escapes a formula-looking column name in the header', async () => {
    await new FileSink({ dir }).write(sourceOf([done({ ' =x': 'v' }, undefined)], [' =x']), ['csv']);
    const { header, records } = await csvRecords(join(dir, 'b.csv'));
    expect(header.at(-1)).toBe("' =x");
    expect(records[0]?.["' =x"]).toBe('v');
  });

  it('escapeFormula: the OWASP triggers, after any leading whitespace; nothing else', () => {
    for (const text of [
      '=1',
      '+1',
      '-1',
      '@a',
      '\t',
      '\tx',
      '\r',
      '\rx',
      ' =1',
      '\n\n-1',
      ' \t @a',
      '\u00a0=1',
      '\u3000=1',
      '＝1+1',
      '＠SUM(A1)',
    ]) {
      expect(escapeFormula(text)).toBe(`'${text}`);
    }
    for (const text of ['', 'a', ' a', '\na', '1-1', 'a=1', "'=1", 'São Paulo', '   ']) {
      expect(escapeFormula(text)).toBe(text);
    }
  });
});

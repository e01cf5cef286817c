// Issue 46 items 10 and 11: the exports an operations person reads (VQ_EXPORT_LAYOUT=readable):
// the plate and the user's columns first, the vehicle under headers in VQ_LANG, lists as text,
// times on VQ_TIME_ZONE's clock, the technical columns last; in the .xlsx a frozen, filtered
// header, fitted widths, typed dates and numbers. Rejects and failures in the reader's language.
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'csv-parse/sync';
import ExcelJS from 'exceljs';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { translator } from '../../src/console/i18n.js';
import { FileSink } from '../../src/sinks/file-sink.js';
import type { ExportRow, ExportSource } from '../../src/sinks/types.js';
import { en, LANGS, wordsFor } from '../../src/words.js';
import { sheetValues } from '../helpers/xlsx.js';

// 12:00 UTC is 09:00 in São Paulo (UTC-3, no daylight saving since 2019).
const T0 = Date.UTC(2026, 10, 27, 12, 0, 0);

/** A finished answer as the simulator (and the provider) writes it: an envelope around `result`. */
const answer = (plate: string, extra: Record<string, unknown> = {}) => ({
  queryId: 'q-1',
  status: 'COMPLETED',
  licensePlate: plate,
  createdAt: new Date(T0 + 1000).toISOString(),
  completedAt: new Date(T0 + 4000).toISOString(),
  result: {
    plate,
    brand: 'FIAT',
    model: 'UNO MILLE',
    year: 2010,
    modelYear: 2011,
    restrictions: ['ALIENACAO FIDUCIARIA', 'RESTRICAO JUDICIAL'],
    ...extra,
  },
});

const ROWS: ExportRow[] = [
  {
    row: 1,
    input: 'abc-1234',
    plate: 'ABC1234',
    status: 'done',
    queryId: 'q-1',
    result: answer('ABC1234', { owner: { kind: 'PJ' } }),
    enqueuedAt: T0,
    createdAt: T0 + 1000,
    finishedAt: T0 + 5000,
    requests: 3,
    key: 'default',
    extra: { cliente: 'Frota Itajubá', codigo: '0012' },
  },
  {
    row: 2,
    input: 'XYZ9876',
    plate: 'XYZ9876',
    status: 'failed',
    queryId: 'q-2',
    error: { code: 'VEHICLE_NOT_FOUND', message: 'No vehicle found for plate XYZ9876.' },
    enqueuedAt: T0,
    createdAt: T0 + 1000,
    finishedAt: T0 + 3000,
    requests: 2,
    extra: { cliente: 'Táxi', codigo: '0013' },
  },
  {
    row: 3,
    input: 'AB-12',
    plate: 'AB12',
    status: 'rejected',
    error: { code: 'BAD_LENGTH', message: 'plates have 7 characters, this has 4' },
    extra: { cliente: 'Outro', codigo: '0014' },
  },
];

const source: ExportSource = {
  batchId: 'b-r',
  extraColumns: ['cliente', 'codigo'],
  async *rows() {
    yield* ROWS;
  },
  async *rejects() {
    yield { row: 3, input: 'AB-12', reason: 'BAD_LENGTH', message: 'plates have 7 characters, this has 4' };
  },
};

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'vqb-readable-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const sink = (lang: 'pt-BR' | 'en', layout: 'readable' | 'raw' = 'readable') =>
  new FileSink({ dir, csvDelimiter: ';', words: { layout, lang, timeZone: 'America/Sao_Paulo' } });

const csvOf = async (name: string) =>
  parse(await readFile(join(dir, name), 'utf8'), { bom: true, delimiter: ';', relax_column_count: true }) as string[][];

describe('the readable export (VQ_EXPORT_LAYOUT=readable)', () => {
  it('puts the plate and the user columns first, the vehicle under pt-BR headers, the technical columns last', async () => {
    await sink('pt-BR').write(source, ['csv']);
    const [header, done, failed, rejected] = await csvOf('b-r.csv');
    expect(header).toEqual([
      'Placa',
      'cliente',
      'codigo',
      'Marca',
      'Modelo',
      'Ano de fabricação',
      'Ano do modelo',
      'Restrições',
      'owner.kind',
      'Situação da consulta',
      'Mensagem',
      'Linha',
      'Placa normalizada',
      'ID da consulta',
      'Código do erro',
      'Possível cobrança dupla',
      'Duplicada da linha',
      'Mesmo veículo que',
      'Reaproveitada',
      'Enfileirada em',
      'Enviada em',
      'Concluída em',
      'Requisições',
      'Chave (conta)',
      'result.createdAt',
      'result.completedAt',
    ]);
    // Read from the answer's result object: the envelope's id, plate and status repeat columns and
    // are left out, as is the vehicle's own copy of the plate.
    expect(header).not.toContain('result.queryId');
    expect(header).not.toContain('result.result.brand');
    const cell = (row: string[] | undefined, name: string) => row?.[header!.indexOf(name)];
    expect(done!.slice(0, 5)).toEqual(['abc-1234', 'Frota Itajubá', '0012', 'FIAT', 'UNO MILLE']);
    // Lists as text, times on São Paulo's clock.
    expect(cell(done, 'Restrições')).toBe('ALIENACAO FIDUCIARIA, RESTRICAO JUDICIAL');
    expect(cell(done, 'Enfileirada em')).toBe('2026-11-27 09:00:00');
    expect(cell(done, 'Concluída em')).toBe('2026-11-27 09:00:05');
    expect(cell(done, 'result.completedAt')).toBe('2026-11-27 09:00:04');
    expect(cell(done, 'Situação da consulta')).toBe('concluída');
    // Failures and rejects in Portuguese, their codes kept.
    expect(cell(failed, 'Situação da consulta')).toBe('falhou');
    expect(cell(failed, 'Mensagem')).toBe('nenhum veículo encontrado para esta placa');
    expect(cell(failed, 'Código do erro')).toBe('VEHICLE_NOT_FOUND');
    expect(cell(rejected, 'Mensagem')).toBe('placas têm 7 caracteres; esta tem 4');
    expect(await csvOf('b-r.rejects.csv')).toEqual([
      ['Linha', 'Entrada', 'Motivo', 'Mensagem'],
      ['3', 'AB-12', 'BAD_LENGTH', 'placas têm 7 caracteres; esta tem 4'],
    ]);
  });

  it('speaks English with VQ_LANG=en', async () => {
    await sink('en').write(source, ['csv']);
    const [header, , failed, rejected] = await csvOf('b-r.csv');
    expect(header!.slice(0, 5)).toEqual(['Plate', 'cliente', 'codigo', 'Make', 'Model']);
    // English is what is stored: the upstream's own words, naming the plate.
    expect(failed![header!.indexOf('Message')]).toBe('No vehicle found for plate XYZ9876.');
    expect(rejected![header!.indexOf('Message')]).toBe('plates have 7 characters, this has 4');
    expect((await csvOf('b-r.rejects.csv'))[0]).toEqual(['Row', 'Input', 'Reason', 'Message']);
  });

  it('writes a workbook with a frozen, filtered header, fitted widths, local dates and numbers', async () => {
    await sink('pt-BR').write(source, ['xlsx']);
    const bytes = await readFile(join(dir, 'b-r.xlsx'));
    const wb = new ExcelJS.Workbook();
    await wb.xlsx.load(bytes as unknown as ArrayBuffer);
    expect(wb.worksheets.map((ws) => ws.name)).toEqual(['resultados', 'rejeitadas']);
    const ws = wb.getWorksheet('resultados')!;
    expect(ws.views[0]).toMatchObject({ state: 'frozen', ySplit: 1 });
    const header = (await sheetValues(bytes, 'resultados'))[0] as string[];
    expect(ws.autoFilter).toBe(`A1:${ws.getColumn(header.length).letter}1`);
    expect(ws.getRow(1).font?.bold).toBe(true);
    const width = (name: string) => ws.getColumn(header.indexOf(name) + 1).width ?? 0;
    // Fitted to the longest text of each column (header included).
    expect(width('cliente')).toBe('Frota Itajubá'.length + 2);
    expect(width('Modelo')).toBe('UNO MILLE'.length + 2);
    expect(width('Situação da consulta')).toBe('Situação da consulta'.length + 2);
    expect(width('Restrições')).toBe('ALIENACAO FIDUCIARIA, RESTRICAO JUDICIAL'.length + 2);
    const done = ws.getRow(2);
    const at = (name: string) => done.getCell(header.indexOf(name) + 1);
    // A date cell whose clock is São Paulo's (exceljs reads it back as that wall time in UTC fields).
    expect(at('Enfileirada em').value).toEqual(new Date(Date.UTC(2026, 10, 27, 9, 0, 0)));
    expect(at('Enfileirada em').numFmt).toBe('dd/mm/yyyy hh:mm:ss');
    expect(at('Ano de fabricação').value).toBe(2010);
    expect(at('Requisições').value).toBe(3);
    const rejects = await sheetValues(bytes, 'rejeitadas');
    expect(rejects).toEqual([
      ['Linha', 'Entrada', 'Motivo', 'Mensagem'],
      [3, 'AB-12', 'BAD_LENGTH', 'placas têm 7 caracteres; esta tem 4'],
    ]);
  });

  it('reads the vehicle beside the envelope when an answer has no result object (VQ_ANSWER_RESULT on the vehicle)', async () => {
    const flat: ExportSource = {
      ...source,
      async *rows() {
        yield { ...ROWS[0]!, result: { id: 'q-1', status: 'COMPLETED', brand: 'FIAT', extras: { cor: 'PRATA' } } };
      },
    };
    await sink('pt-BR').write(flat, ['csv']);
    const [header, row] = await csvOf('b-r.csv');
    expect(header!.slice(0, 4)).toEqual(['Placa', 'cliente', 'codigo', 'Marca']);
    expect(header).toContain('extras.cor');
    expect(header).not.toContain('result.status');
    expect(row![header!.indexOf('extras.cor')]).toBe('PRATA');
  });

  it('keeps the raw layout with VQ_EXPORT_LAYOUT=raw: the columns as before, plain sheets', async () => {
    await sink('pt-BR', 'raw').write(source, ['csv', 'xlsx']);
    const [header] = await csvOf('b-r.csv');
    expect(header!.slice(0, 4)).toEqual(['row', 'input', 'plate', 'status']);
    expect(header).toContain('result.result.brand');
    const bytes = await readFile(join(dir, 'b-r.xlsx'));
    const wb = new ExcelJS.Workbook();
    await wb.xlsx.load(bytes as unknown as ArrayBuffer);
    expect(wb.worksheets.map((ws) => ws.name)).toEqual(['results', 'rejects']);
    expect(wb.getWorksheet('results')!.autoFilter).toBeUndefined();
  });
});

describe('one catalogue', () => {
  it('the console says every export and run word as the exports do, in both languages', () => {
    for (const lang of LANGS) {
      const page = translator(lang);
      const words = wordsFor(lang);
      for (const key of Object.keys(en) as (keyof typeof en)[])
        expect(page(key, { n: 4 }), key).toBe(words(key, { n: 4 }));
    }
    expect(translator('pt-BR')('reject.BAD_LENGTH', { n: 4 })).toBe('placas têm 7 caracteres; esta tem 4');
  });
});

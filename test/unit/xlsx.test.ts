import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import ExcelJS from 'exceljs';
import JSZip from 'jszip';
import { describe, expect, it } from 'vitest';
import { isVqbError } from '../../src/errors.js';
import type { InputRow } from '../../src/producers/types.js';
import { cellText, isXlsxInput, readPlateXlsx, type XlsxReadOptions } from '../../src/producers/xlsx.js';
import { exceljsWorkbook } from '../helpers/xlsx.js';
import { deflateBomb, lyingXlsx, rewriteZip } from '../helpers/zip-bomb.js';

const fixturePath = fileURLToPath(new URL('../fixtures/xlsx/libreoffice.xlsx', import.meta.url));

async function readAll(bytes: Buffer, options?: XlsxReadOptions) {
  const { header, rows, digest } = await readPlateXlsx(bytes, options);
  const out: InputRow[] = [];
  for await (const row of rows) out.push(row);
  return { header, rows: out, digest };
}

async function errorCode(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
  } catch (err) {
    expect(isVqbError(err)).toBe(true);
    expect((err as Error).name).toBe('InputError');
    return (err as { code: string }).code;
  }
  throw new Error('expected an InputError');
}

async function workbook(build: (wb: ExcelJS.Workbook) => void): Promise<Buffer> {
  const wb = new ExcelJS.Workbook();
  build(wb);
  return Buffer.from(await wb.xlsx.writeBuffer());
}

describe('cellText', () => {
  it('reads each kind of cell as the text a person sees', () => {
    expect(cellText(1234567)).toBe('1234567');
    expect(cellText(1.23e6)).toBe('1230000');
    expect(cellText(1.2345678901234567e19)).toBe('12345678901234600000'); // past 2^53: the 15 digits a spreadsheet keeps
    expect(cellText(10.25)).toBe('10.25');
    expect(cellText(-3)).toBe('-3');
    expect(cellText(1e-7)).toBe('0.0000001');
    expect(cellText('0012345')).toBe('0012345');
    expect(cellText(null)).toBe('');
    expect(cellText(undefined)).toBe('');
    expect(cellText(true)).toBe('TRUE');
    expect(cellText(false)).toBe('FALSE');
    expect(cellText(new Date(Date.UTC(2024, 2, 1)))).toBe('2024-03-01');
    expect(cellText(new Date(Date.UTC(2024, 2, 1, 10, 30)))).toBe('2024-03-01T10:30:00');
    expect(cellText({ richText: [{ text: 'ABC' }, { text: '1D23', font: { bold: true } }] })).toBe('ABC1D23');
    expect(cellText({ formula: 'A1*2', result: 42 })).toBe('42');
    expect(cellText({ formula: 'NOW()', result: new Date(Date.UTC(2020, 0, 2)) })).toBe('2020-01-02');
    expect(cellText({ formula: 'A1', date1904: false } as unknown as ExcelJS.CellValue)).toBe(''); // no cached result: empty, not evaluated
    expect(cellText({ sharedFormula: 'A2', result: 'x' } as unknown as ExcelJS.CellValue)).toBe('x');
    expect(cellText({ formula: '1/0', result: { error: '#DIV/0!' } })).toBe('#DIV/0!');
    expect(cellText({ error: '#N/A' })).toBe('#N/A');
    expect(cellText({ text: 'site', hyperlink: 'http://example.com' })).toBe('site');
    expect(
      cellText({
        text: { richText: [{ text: 'a' }, { text: 'b' }] },
        hyperlink: 'http://x',
      } as unknown as ExcelJS.CellValue),
    ).toBe('ab');
  });
});

describe('isXlsxInput', () => {
  it('goes by media type, name, or the zip magic bytes', () => {
    expect(
      isXlsxInput({ contentType: 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet; charset=binary' }),
    ).toBe(true);
    expect(isXlsxInput({ fileName: 'Frota.XLSX' })).toBe(true);
    expect(isXlsxInput({ fileName: 'frota.csv', head: Buffer.from('PK\x03\x04rest', 'latin1') })).toBe(true);
    expect(isXlsxInput({ fileName: 'frota.csv', contentType: 'text/csv', head: Buffer.from('placa\nABC1234\n') })).toBe(
      false,
    );
  });
});

describe('readPlateXlsx', () => {
  it('reads the exceljs workbook: header by name, plates as text and rich text, typed cells as text, formulas cached', async () => {
    const { header, rows } = await readAll(await exceljsWorkbook());
    expect(header).toMatchObject({
      sheet: 'Placas',
      sheets: ['Placas', 'Outra'],
      hasHeader: true,
      plateColumn: 'PLACA',
      extraColumns: ['id', 'valor', 'calculado', 'data', 'ok', 'nota'],
    });
    expect(rows).toEqual([
      {
        row: 1,
        input: 'EXC1A23',
        extra: {
          id: '1234567',
          valor: '10.25',
          calculado: '20.5',
          data: '2024-03-01',
          ok: 'TRUE',
          nota: '=HYPERLINK("http://x")',
        },
      },
      {
        row: 2,
        input: 'EXC2B34',
        extra: { id: '2', valor: '3', calculado: '999', data: '2024-03-01T10:30:00', ok: 'FALSE', nota: '+55 11' },
      },
      // row 3 is blank: skipped, counted
      {
        row: 4,
        input: 'exc-3456',
        extra: { id: '4', valor: '-1', calculado: 'cached', data: '', ok: '', nota: '@user' },
      },
    ]);
  });

  it('reads the LibreOffice fixture, and --sheet picks the second sheet (case-insensitively)', async () => {
    const bytes = await readFile(fixturePath);
    const first = await readAll(bytes);
    expect(first.header).toMatchObject({
      sheet: 'Frota',
      sheets: ['Frota', 'Segunda'],
      plateColumn: 'Placa do veículo',
    });
    expect(first.rows.map((r) => r.input)).toEqual(['ABC1D23', 'xyz-9876', '0012345', 'LIB2O24']);
    expect(first.rows.map((r) => r.row)).toEqual([1, 2, 3, 5]);
    expect(first.rows[0]!.extra).toEqual({
      Cliente: 'Ação Ltda',
      Código: '1234567',
      Valor: '10.5',
      Dobro: '21',
      Vencimento: '2024-03-01',
      Ativo: 'TRUE',
    });
    expect(first.rows[1]!.extra.Cliente).toBe('=cmd|calc');
    const second = await readAll(bytes, { sheet: 'segunda' });
    expect(second.header).toMatchObject({ sheet: 'Segunda', plateColumn: 'plate', extraColumns: ['note'] });
    expect(second.rows.map((r) => r.input)).toEqual(['SEC0N01', 'SEC0N02']);
    expect(second.digest).not.toBe(first.digest); // another sheet, another batch
    expect((await readAll(bytes, { sheet: 'Frota' })).digest).toBe(first.digest);
  });

  it('finds the plate column by content when there is no header, and takes --column', async () => {
    const bytes = await workbook((wb) => {
      const ws = wb.addWorksheet('s');
      ws.addRow([1, 'ABC1D23', 'x']);
      ws.addRow([2, 'ABC1D24', 'y']);
    });
    const { header, rows } = await readAll(bytes);
    expect(header).toMatchObject({ hasHeader: false, plateColumn: 'col2', extraColumns: ['col1', 'col3'] });
    expect(rows[0]).toEqual({ row: 1, input: 'ABC1D23', extra: { col1: '1', col3: 'x' } });
    expect((await readAll(bytes, { column: 3 })).rows[1]!.input).toBe('y');
  });

  it('skips hidden sheets when choosing the first', async () => {
    const bytes = await workbook((wb) => {
      wb.addWorksheet('lookup', { state: 'hidden' }).addRow(['nothing']);
      wb.addWorksheet('dados').addRows([['placa'], ['ABC1D23']]);
    });
    expect((await readAll(bytes)).header.sheet).toBe('dados');
  });

  it('refuses bad input with typed codes', async () => {
    expect(await errorCode(readPlateXlsx(Buffer.from('placa\nABC1234\n')))).toBe('XLSX_INVALID');
    expect(await errorCode(readPlateXlsx(Buffer.alloc(0)))).toBe('XLSX_INVALID');
    const good = await exceljsWorkbook();
    expect(await errorCode(readPlateXlsx(good.subarray(0, good.length >> 1)))).toBe('XLSX_INVALID');
    expect(await errorCode(readPlateXlsx(encryptedWorkbook()))).toBe('XLSX_ENCRYPTED');
    expect(await errorCode(readPlateXlsx(oldXls()))).toBe('XLSX_INVALID');
    expect(await errorCode(readPlateXlsx(await zipOf({ 'plates.csv': 'placa\nABC1234\n' })))).toBe('XLSX_INVALID');
    expect(await errorCode(readPlateXlsx(await workbook(() => {})))).toBe('XLSX_NO_SHEET');
    expect(await errorCode(readPlateXlsx(good, { sheet: 'Nope' }))).toBe('XLSX_SHEET_NOT_FOUND');
    expect(await errorCode(readPlateXlsx(await workbook((wb) => wb.addWorksheet('vazia'))))).toBe('XLSX_EMPTY');
    expect(
      await errorCode(readPlateXlsx(await workbook((wb) => wb.addWorksheet('so cabecalho').addRow(['placa', 'nome'])))),
    ).toBe('XLSX_EMPTY');
    expect(await errorCode(readPlateXlsx(good, { column: 'chassi' }))).toBe('XLSX_NO_PLATE_COLUMN');
    expect(await errorCode(readPlateXlsx(good, { maxBytes: 1000 }))).toBe('XLSX_TOO_LARGE');
    const big = await workbook((wb) =>
      wb.addWorksheet('s').addRows([
        ['placa', 'nota'],
        ['ABC1D23', 'x'.repeat(2000)],
      ]),
    );
    expect(await errorCode(readPlateXlsx(big, { maxFieldBytes: 1000 }))).toBe('XLSX_FIELD_TOO_LARGE');
  });

  it('refuses a zip bomb from its declared sizes, before inflating it', async () => {
    const bomb = await zipOf({ 'xl/workbook.xml': ' '.repeat(1024 * 1024) });
    // What a bomb declares: ~1 GiB inflated from a few KiB (the central directory's size field).
    const central = bomb.indexOf(Buffer.from([0x50, 0x4b, 0x01, 0x02]));
    bomb.writeUInt32LE(1 << 30, central + 24);
    expect(bomb.length).toBeLessThan(16 * 1024);
    expect(await errorCode(readPlateXlsx(bomb))).toBe('XLSX_TOO_LARGE');
  });

  it('refuses a lying zip (its sheet declares 4 KiB, inflates to 1 GiB) by counting what really inflates', async () => {
    const bomb = lyingXlsx(await exceljsWorkbook());
    expect(bomb.length).toBeLessThan(1.5 * 1024 * 1024);
    const before = process.memoryUsage().rss;
    const started = Date.now();
    const err = await readPlateXlsx(bomb).catch((e: unknown) => e as Error & { code: string });
    const grew = process.memoryUsage().rss - before;
    console.log(`lying zip refused in ${Date.now() - started} ms, rss +${(grew / 2 ** 20).toFixed(1)} MiB`);
    expect(isVqbError(err)).toBe(true);
    expect(err).toMatchObject({ code: 'XLSX_TOO_LARGE' });
    expect((err as Error).message).toMatch(/inflates to more than \d+ bytes/);
    // The output is counted and dropped: nothing near the 100 MiB allowed is held.
    expect(grew).toBeLessThan(50 * 1024 * 1024);
  });

  it('refuses zip tricks as damaged: zip64, bytes before the archive, overlapping entries; too many entries', async () => {
    const good = await exceljsWorkbook();
    const eocd = good.lastIndexOf(Buffer.from([0x50, 0x4b, 0x05, 0x06]));
    const zip64 = Buffer.from(good);
    zip64.writeUInt32LE(0xffffffff, eocd + 16);
    expect(await errorCode(readPlateXlsx(zip64))).toBe('XLSX_INVALID');
    const prefixed = Buffer.concat([Buffer.from('PK\x03\x04'), Buffer.alloc(100), good]);
    expect(await errorCode(readPlateXlsx(prefixed))).toBe('XLSX_INVALID');
    // Two directory entries naming the same data (the "overlapping files" bomb reuses one stream many times).
    const central = good.indexOf(Buffer.from([0x50, 0x4b, 0x01, 0x02]));
    const overlap = Buffer.from(good);
    const second = central + 46 + good.readUInt16LE(central + 28) + good.readUInt16LE(central + 30);
    overlap.writeUInt32LE(good.readUInt32LE(central + 42), second + 42);
    expect(await errorCode(readPlateXlsx(overlap))).toBe('XLSX_INVALID');
    const crowded = rewriteZip(good, (entries) => {
      for (let i = 0; i < 10_001; i++)
        entries.push({ name: `x/${i}`, method: 0, crc: 0, data: Buffer.alloc(0), size: 0 });
    });
    expect(await errorCode(readPlateXlsx(crowded))).toBe('XLSX_TOO_LARGE');
    // Many small lying entries add up as one large one would.
    const spread = rewriteZip(good, (entries) => {
      const bomb = deflateBomb(2);
      for (let i = 0; i < 8; i++) entries.push({ name: `xl/media/m${i}.bin`, method: 8, crc: 0, data: bomb, size: 10 });
    });
    expect(await errorCode(readPlateXlsx(spread))).toBe('XLSX_TOO_LARGE');
  });
});

async function zipOf(files: Record<string, string>): Promise<Buffer> {
  const zip = new JSZip();
  for (const [name, text] of Object.entries(files)) zip.file(name, text);
  return zip.generateAsync({ type: 'nodebuffer', compression: 'DEFLATE' });
}

/** An OLE compound file holding an "EncryptedPackage" stream: what Office writes for a workbook with a password. */
function encryptedWorkbook(): Buffer {
  const buf = oldXls();
  buf.write('EncryptedPackage', 512, 'utf16le');
  return buf;
}

/** The OLE compound file signature and nothing else of note: an old .xls as far as the reader can tell. */
function oldXls(): Buffer {
  const buf = Buffer.alloc(1536);
  Buffer.from([0xd0, 0xcf, 0x11, 0xe0, 0xa1, 0xb1, 0x1a, 0xe1]).copy(buf);
  return buf;
}

import { createReadStream } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { isVqbError } from '../../src/errors.js';
import { type CsvReadOptions, readPlateCsv } from '../../src/producers/csv.js';
import { PlateDeduper } from '../../src/producers/dedup.js';
import type { InputRow } from '../../src/producers/types.js';

const fixture = (name: string) => createReadStream(fileURLToPath(new URL(`../fixtures/csv/${name}`, import.meta.url)));

async function collect(rows: AsyncIterable<InputRow>): Promise<InputRow[]> {
  const out: InputRow[] = [];
  for await (const row of rows) out.push(row);
  return out;
}

async function readAll(source: Parameters<typeof readPlateCsv>[0], options?: CsvReadOptions) {
  const { header, rows } = await readPlateCsv(source, options);
  return { header, rows: await collect(rows) };
}

async function* chunks(data: Buffer | string, size: number): AsyncGenerator<Buffer> {
  const buf = typeof data === 'string' ? Buffer.from(data, 'utf8') : data;
  for (let i = 0; i < buf.length; i += size) yield buf.subarray(i, i + size);
}

/** The InputError code a promise rejects with (fails the test if it resolves). */
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

/** Deterministic pseudo-random bytes (xorshift), so a failure can be reproduced. */
function randomBytes(n: number, seed = 42): Buffer {
  const out = Buffer.alloc(n);
  let x = seed;
  for (let i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    out[i] = x & 0xff;
  }
  return out;
}

/** Plate number i in the old format: AAA0000, AAA0001, … */
function plateOf(i: number): string {
  const letters = Math.floor(i / 10_000);
  const l = (k: number) => String.fromCharCode(65 + (Math.floor(letters / 26 ** k) % 26));
  return `${l(2)}${l(1)}${l(0)}${String(i % 10_000).padStart(4, '0')}`;
}

describe('readPlateCsv: files as users save them', () => {
  it('reads pt-BR Excel CSV: `;`, Windows-1252, CRLF, no BOM', async () => {
    const { header, rows } = await readAll(fixture('excel-ptbr-1252.csv'));
    expect(header).toEqual({
      delimiter: ';',
      encoding: 'windows-1252',
      hasHeader: true,
      plateColumn: 'Placa',
      plateColumnFoundBy: 'header',
      extraColumns: ['Proprietário', 'Cidade', 'Valor'],
    });
    expect(rows).toEqual([
      { row: 1, input: 'ABC1234', extra: { Proprietário: 'João da Silva', Cidade: 'São Paulo', Valor: '1.234,56' } },
      { row: 2, input: 'abc-1c34', extra: { Proprietário: 'Ana Conceição', Cidade: 'Maceió', Valor: '10,5' } },
      { row: 3, input: 'XYZ9A87', extra: { Proprietário: 'José Ávila', Cidade: 'Florianópolis', Valor: '0' } },
    ]);
  });

  it('decodes the same whichever way the bytes are split into chunks', async () => {
    const { readFile } = await import('node:fs/promises');
    for (const name of ['excel-ptbr-1252.csv', 'utf8-bom-comma.csv', 'tab.tsv']) {
      const bytes = await readFile(fileURLToPath(new URL(`../fixtures/csv/${name}`, import.meta.url)));
      const whole = await readAll(chunks(bytes, bytes.length));
      for (const size of [1, 2, 3, 7]) {
        expect(await readAll(chunks(bytes, size))).toEqual(whole);
      }
    }
  });

  it('reads UTF-8 with BOM and `,`, keeping quoted commas', async () => {
    const { header, rows } = await readAll(fixture('utf8-bom-comma.csv'));
    expect(header).toMatchObject({ delimiter: ',', encoding: 'utf-8', hasHeader: true, plateColumn: 'license_plate' });
    expect(rows.map((r) => [r.row, r.input, r.extra])).toEqual([
      [1, 'BRA2E19', { owner: 'Zoë Müller', city: 'Curitiba' }],
      [2, 'QWE4567', { owner: 'Smith, John', city: 'Niterói' }],
    ]);
  });

  it('reads tab-separated files, ignoring `,` and `;` inside cells', async () => {
    const { header, rows } = await readAll(fixture('tab.tsv'));
    expect(header).toMatchObject({ delimiter: '\t', plateColumn: 'PLACA DO VEÍCULO', extraColumns: ['modelo', 'ano'] });
    expect(rows.map((r) => r.extra['modelo'])).toEqual(['Fiat Uno, 1.0', 'Gol; G5']);
  });

  it('keeps quoted delimiters, line breaks and quotes; skips blank lines but counts them in `row`', async () => {
    const { header, rows } = await readAll(fixture('quoted-crlf-blank.csv'));
    expect(header.delimiter).toBe(';');
    // Spreadsheet rows 2, 4 and 6 (row + 1): the blank line and the `;;` line keep their numbers.
    expect(rows).toEqual([
      { row: 1, input: 'ABC1234', extra: { obs: 'tem ; ponto e vírgula', cidade: 'Rio' } },
      { row: 3, input: 'DEF5678', extra: { obs: 'duas\r\nlinhas', cidade: 'Belo "BH" Horizonte' } },
      { row: 5, input: 'GHI9J01', extra: { obs: 'simples', cidade: 'Recife' } },
    ]);
  });

  it('reads a file of plates only, without a header', async () => {
    const { header, rows } = await readAll(fixture('no-header.csv'));
    expect(header).toEqual({
      delimiter: ',',
      encoding: 'utf-8',
      hasHeader: false,
      plateColumn: 'col1',
      plateColumnFoundBy: 'content',
      extraColumns: [],
    });
    expect(rows.map((r) => [r.row, r.input])).toEqual([
      [1, 'ABC1234'],
      [2, 'DEF5G67'],
      [3, 'abc 1234'],
      [5, 'XX'],
    ]);
  });

  it('finds the plate column from the data when the header names it oddly', async () => {
    const { header, rows } = await readAll(fixture('plates-second-column.csv'));
    expect(header).toMatchObject({ hasHeader: true, plateColumn: 'vehicle', extraColumns: ['id', 'notes'] });
    expect(rows[0]).toEqual({ row: 1, input: 'ABC1234', extra: { id: '1', notes: 'first' } });
  });

  it('finds a data column holding plates in a file without a header', async () => {
    const { header, rows } = await readAll(chunks('João;ABC1234\nAna;DEF5G67\n', 64));
    expect(header).toMatchObject({ hasHeader: false, plateColumn: 'col2', extraColumns: ['col1'] });
    expect(rows[1]).toEqual({ row: 2, input: 'DEF5G67', extra: { col1: 'Ana' } });
  });

  it.each([
    ['Placa'],
    ['PLACA DO VEÍCULO'],
    ['license_plate'],
    ['License Plate'],
    ['placa_veiculo'],
    ['Número da placa'],
    ['Nº da placa'],
    ['Placa (Mercosul)'],
    ['vehicle-plate'],
  ])('recognises the header %j', async (name) => {
    const { header, rows } = await readAll(chunks(`nome;${name};cidade\nAna;ABC-1234;Rio\n`, 64));
    expect(header).toMatchObject({ hasHeader: true, plateColumn: name, extraColumns: ['nome', 'cidade'] });
    expect(rows).toEqual([{ row: 1, input: 'ABC-1234', extra: { nome: 'Ana', cidade: 'Rio' } }]);
  });

  it('does not take "template" for a plate column', async () => {
    const { header } = await readAll(chunks('template;placa\nx;ABC1234\n', 64));
    expect(header.plateColumn).toBe('placa');
  });

  it('carries every other column, tolerating ragged rows', async () => {
    const { header, rows } = await readPlateCsv(chunks('placa;a;b\nABC1234;1;2;surplus\nDEF5678\n', 64));
    expect(await collect(rows)).toEqual([
      { row: 1, input: 'ABC1234', extra: { a: '1', b: '2', col4: 'surplus' } },
      { row: 2, input: 'DEF5678', extra: { a: '', b: '' } },
    ]);
    expect(header.extraColumns).toEqual(['a', 'b', 'col4']);
  });

  it('names empty and repeated header cells so no column is lost', async () => {
    const { header, rows } = await readAll(chunks('placa,obs,,obs\nABC1234,x,y,z\n', 64));
    expect(header.extraColumns).toEqual(['obs', 'col3', 'obs_4']);
    expect(rows[0]?.extra).toEqual({ obs: 'x', col3: 'y', obs_4: 'z' });
  });
});

describe('readPlateCsv: the column option', () => {
  it('picks a column by name, case- and accent-insensitively', async () => {
    const { header, rows } = await readAll(fixture('excel-ptbr-1252.csv'), { column: 'CIDADE' });
    expect(header).toMatchObject({
      hasHeader: true,
      plateColumn: 'Cidade',
      extraColumns: ['Placa', 'Proprietário', 'Valor'],
    });
    expect(rows[0]?.input).toBe('São Paulo');
    expect(rows[0]?.extra['Placa']).toBe('ABC1234');
  });

  it('picks a column by 1-based index, with or without a header', async () => {
    const withHeader = await readAll(fixture('excel-ptbr-1252.csv'), { column: 1 });
    expect(withHeader.header).toMatchObject({ hasHeader: true, plateColumn: 'Placa' });
    expect(withHeader.rows).toHaveLength(3);

    const noHeader = await readAll(chunks('x1;ABC1234\nx2;DEF5678\n', 64), { column: 2 });
    expect(noHeader.header).toMatchObject({ hasHeader: false, plateColumn: 'col2', extraColumns: ['col1'] });
    expect(noHeader.rows.map((r) => r.input)).toEqual(['ABC1234', 'DEF5678']);

    const wordsHeader = await readAll(chunks('id;coisa\n1;ABC1234\n', 64), { column: 2 });
    expect(wordsHeader.header).toMatchObject({ hasHeader: true, plateColumn: 'coisa' });
  });

  it('rejects a column that is not there with CSV_NO_PLATE_COLUMN', async () => {
    expect(await errorCode(readAll(fixture('excel-ptbr-1252.csv'), { column: 'chassi' }))).toBe('CSV_NO_PLATE_COLUMN');
    expect(await errorCode(readAll(fixture('excel-ptbr-1252.csv'), { column: 9 }))).toBe('CSV_NO_PLATE_COLUMN');
    expect(await errorCode(readAll(fixture('excel-ptbr-1252.csv'), { column: 0 }))).toBe('CSV_NO_PLATE_COLUMN');
  });
});

describe('readPlateCsv: encodings decided late', () => {
  it('switches to Windows-1252 when accents appear after the first 64 KiB of ASCII', async () => {
    const ascii = Array.from({ length: 10_000 }, (_, i) => `${plateOf(i)};Rio`).join('\n');
    const bytes = Buffer.concat([
      Buffer.from(`placa;cidade\n${ascii}\n`),
      Buffer.from('ZZZ9999;São Paulo\n', 'latin1'),
    ]);
    const { header, rows } = await readPlateCsv(chunks(bytes, 16 * 1024));
    expect(header.encoding).toBe('utf-8'); // provisional: nothing but ASCII so far
    const all = await collect(rows);
    expect(header.encoding).toBe('windows-1252');
    expect(all.at(-1)).toEqual({ row: 10_001, input: 'ZZZ9999', extra: { cidade: 'São Paulo' } });
  });

  it('fails with CSV_MIXED_ENCODING when a UTF-8 file has Windows-1252 bytes later', async () => {
    const rows = Array.from({ length: 5000 }, (_, i) => `${plateOf(i)};Niterói`).join('\n');
    const bytes = Buffer.concat([Buffer.from(`placa;cidade\n${rows}\n`), Buffer.from('ZZZ9999;São Paulo\n', 'latin1')]);
    const { rows: iterable } = await readPlateCsv(chunks(bytes, 16 * 1024));
    const seen: InputRow[] = [];
    const code = await errorCode(
      (async () => {
        for await (const row of iterable) seen.push(row);
      })(),
    );
    expect(code).toBe('CSV_MIXED_ENCODING');
    expect(seen.length).toBeGreaterThan(1000);
    expect(seen[0]).toEqual({ row: 1, input: 'AAA0000', extra: { cidade: 'Niterói' } });
  });
});

describe('readPlateCsv: garbage in, InputError out', () => {
  it.each([
    ['zip magic (an .xlsx)', Buffer.concat([Buffer.from('PK\x03\x04', 'latin1'), randomBytes(200)]), 'CSV_BINARY'],
    ['NUL bytes', Buffer.from('placa\nABC1234\n\0\0\0\n'), 'CSV_BINARY'],
    ['random bytes', randomBytes(4096), 'CSV_BINARY'],
    ['random bytes without NUL', Buffer.from(randomBytes(4096).map((b) => b || 1)), 'CSV_BINARY'],
    ['UTF-16 "Unicode text"', Buffer.from('\ufeffplaca\tnome\r\n', 'utf16le'), 'CSV_UNSUPPORTED_ENCODING'],
    ['an empty file', Buffer.alloc(0), 'CSV_EMPTY'],
    ['blank lines only', Buffer.from('\r\n\r\n  \n;;\n'), 'CSV_EMPTY'],
    ['an unclosed quote', Buffer.from('placa;obs\nABC1234;"never closed\n'), 'CSV_UNREADABLE'],
  ])('%s', async (_name, bytes, code) => {
    expect(await errorCode(readAll(chunks(bytes, 1024)))).toBe(code);
  });

  it('fails on NUL bytes past the sniff window, keeping the rows already read', async () => {
    const good = Array.from({ length: 10_000 }, (_, i) => plateOf(i)).join('\n');
    const bytes = Buffer.concat([Buffer.from(`placa\n${good}\n`), Buffer.from([0, 0, 0, 10])]);
    const { rows } = await readPlateCsv(chunks(bytes, 8192));
    const seen: InputRow[] = [];
    const code = await errorCode(
      (async () => {
        for await (const row of rows) seen.push(row);
      })(),
    );
    expect(code).toBe('CSV_BINARY');
    expect(seen.length).toBeGreaterThan(5000);
    expect(seen.slice(0, 2)).toEqual([
      { row: 1, input: 'AAA0000', extra: {} },
      { row: 2, input: 'AAA0001', extra: {} },
    ]);
  });

  it('stops a 10 MB field with CSV_FIELD_TOO_LARGE without reading the rest of the file', async () => {
    let pulled = 0;
    async function* source(): AsyncGenerator<Buffer> {
      yield Buffer.from('placa;obs\nABC1234;ok\nDEF5678;ok\nGHI9012;');
      const block = Buffer.alloc(64 * 1024, 'x');
      for (let i = 0; i < 160; i++) {
        pulled += block.length;
        yield block;
      }
      yield Buffer.from('\n');
    }
    const { rows } = await readPlateCsv(source());
    const seen: number[] = [];
    const code = await errorCode(
      (async () => {
        for await (const row of rows) seen.push(row.row);
      })(),
    );
    expect(code).toBe('CSV_FIELD_TOO_LARGE');
    expect(seen).toEqual([1, 2]);
    expect(pulled).toBeLessThan(2 * 1024 * 1024);
  });

  it('reads a 100,000-character line, and limits a single 100,000-character field', async () => {
    const cells = Array.from({ length: 10 }, (_, i) => String(i).repeat(10_000));
    const wide = `placa;${cells.map((_, i) => `c${i}`).join(';')}\nABC1234;${cells.join(';')}\n`;
    const { rows } = await readAll(chunks(wide, 4096));
    expect(rows[0]?.extra['c9']).toBe('9'.repeat(10_000));
    expect(Object.keys(rows[0]?.extra ?? {})).toHaveLength(10);

    const long = `placa;obs\nABC1234;${'é'.repeat(100_000)}\n`;
    expect(await errorCode(readAll(chunks(long, 4096)))).toBe('CSV_FIELD_TOO_LARGE');
    const allowed = await readAll(chunks(long, 4096), { maxFieldBytes: 256 * 1024 });
    expect(allowed.rows[0]?.extra['obs']).toHaveLength(100_000);
  });

  it('stops a runaway row (an unclosed quote) at maxRowBytes', async () => {
    const runaway = `placa;obs\nABC1234;"open\n${'ABC1234;short\n'.repeat(20_000)}`;
    expect(await errorCode(readAll(chunks(runaway, 4096), { maxRowBytes: 100_000 }))).toBe('CSV_FIELD_TOO_LARGE');
    const manyFields = `placa;${Array.from({ length: 3000 }, () => 'x'.repeat(40)).join(';')}\n`;
    expect(await errorCode(readAll(chunks(manyFields, 4096), { maxRowBytes: 100_000 }))).toBe('CSV_ROW_TOO_LARGE');
  });

  it('closes a Readable source when the reader stops early', async () => {
    const stream = fixture('excel-ptbr-1252.csv');
    const { rows } = await readPlateCsv(stream);
    for await (const row of rows) {
      expect(row.row).toBe(1);
      break;
    }
    expect(stream.destroyed).toBe(true);
  });
});

// Its memory over 1,000,000 rows is a benchmark figure (npm run bench: "CSV reader alone"),
// not a test: here, only that a long stream arrives whole and in order.
describe('readPlateCsv: a long stream', () => {
  it('reads 20,000 generated rows across many chunks, in order, none lost', async () => {
    const total = 20_000;
    async function* generate(): AsyncGenerator<Buffer> {
      yield Buffer.from('placa;cidade;obs\r\n');
      for (let start = 0; start < total; start += 2000) {
        let text = '';
        for (let i = start; i < start + 2000; i++) text += `${plateOf(i)};São Paulo;"linha ${i}"\r\n`;
        yield Buffer.from(text);
      }
    }
    const { header, rows } = await readPlateCsv(generate());
    let count = 0;
    let last: InputRow | undefined;
    for await (const row of rows) {
      count++;
      expect(row.row).toBe(count);
      last = row;
    }
    expect(header).toMatchObject({ delimiter: ';', encoding: 'utf-8', plateColumn: 'placa' });
    expect(count).toBe(total);
    expect(last).toEqual({
      row: total,
      input: plateOf(total - 1),
      extra: { cidade: 'São Paulo', obs: `linha ${total - 1}` },
    });
  });
});

describe('PlateDeduper', () => {
  it('flags repeats with the first row, rejects non-plates, and links old and Mercosul forms', () => {
    const dedup = new PlateDeduper();
    const check = (row: number, input: string) => dedup.check({ row, input });
    expect(check(1, 'abc-1234')).toEqual({ kind: 'new', plate: 'ABC1234', format: 'old' });
    expect(check(2, 'ABC1234')).toEqual({ kind: 'duplicate', plate: 'ABC1234', firstRow: 1 });
    expect(check(3, 'ABC1C34')).toEqual({
      kind: 'new',
      plate: 'ABC1C34',
      format: 'mercosul',
      sameVehicleAs: 'ABC1234',
    });
    expect(check(4, ' abc 1c34 ')).toEqual({ kind: 'duplicate', plate: 'ABC1C34', firstRow: 3 });
    expect(check(5, 'XYZ9J99')).toEqual({ kind: 'new', plate: 'XYZ9J99', format: 'mercosul' });
    expect(check(6, 'XYZ9999')).toEqual({ kind: 'new', plate: 'XYZ9999', format: 'old', sameVehicleAs: 'XYZ9J99' });
    expect(check(7, 'DEF5K67')).toEqual({ kind: 'new', plate: 'DEF5K67', format: 'mercosul' }); // K has no old form
    expect(check(8, '   ')).toMatchObject({ kind: 'rejected', reason: 'EMPTY', normalized: '' });
    expect(check(9, 'AB-123')).toMatchObject({ kind: 'rejected', reason: 'BAD_LENGTH', normalized: 'AB123' });
    expect(check(10, '1234ABC')).toMatchObject({ kind: 'rejected', reason: 'BAD_FORMAT', normalized: '1234ABC' });
    expect(dedup.size).toBe(5);
  });
});

// Issue 36 (2, 15): which column of a plate file holds the plates, when nobody named it. A column
// picked by its content must hold mostly plates over the whole file; an empty first sheet names
// the sheets that may hold them. Pure readers, no Redis.
import { Readable } from 'node:stream';
import ExcelJS from 'exceljs';
import { describe, expect, it } from 'vitest';
import { readPlateCsv } from '../../src/producers/csv.js';
import { decideHeader, mostlyPlates } from '../../src/producers/csv-header.js';
import type { InputRow } from '../../src/producers/types.js';
import { readPlateXlsx } from '../../src/producers/xlsx.js';

async function readCsv(text: string, column?: string): Promise<InputRow[]> {
  const { rows } = await readPlateCsv(Readable.from([Buffer.from(text)]), column ? { column } : {});
  const out: InputRow[] = [];
  for await (const row of rows) out.push(row);
  return out;
}

describe('a plate column picked by its content', () => {
  it('says how each column was chosen', () => {
    expect(decideHeader(['nome', 'cidade'], ['Maria', 'Recife']).foundBy).toBe('content');
    expect(decideHeader(['placa', 'cidade'], ['ABC1D23', 'Recife']).foundBy).toBe('header');
    expect(decideHeader(['x', 'y'], ['ABC1D23', 'Recife'], 'y').foundBy).toBe('column');
    expect(mostlyPlates(5, 68_749)).toBe(false);
    expect(mostlyPlates(6, 10)).toBe(true);
    expect(mostlyPlates(0, 0)).toBe(false);
  });

  it('refuses names and cities (CSV_NO_PLATE_COLUMN, the columns listed)', async () => {
    await expect(readCsv('nome;cidade\nMaria;Recife\nJoão;Natal\n')).rejects.toMatchObject({
      code: 'CSV_NO_PLATE_COLUMN',
      message: expect.stringContaining('the columns are "nome", "cidade"'),
    });
  });

  it('refuses random junk with a few plate-looking strings among 2,000 rows', async () => {
    const junk = Array.from({ length: 2_000 }, (_, i) => (i % 400 === 0 ? 'ABC1D23' : `x${i}y${i * 7}`));
    await expect(readCsv(`${junk.join('\n')}\n`)).rejects.toMatchObject({
      code: 'CSV_NO_PLATE_COLUMN',
      message: expect.stringMatching(/column "col1" was picked by its content, but only 5 of its 2000 rows/),
    });
  });

  it('keeps a plate list with some typos, and a column named by the user whatever it holds', async () => {
    const plates = ['ABC1D23', 'ABC1D24', 'ABC12', 'ABC1D25'];
    expect(await readCsv(`${plates.join('\n')}\n`)).toHaveLength(4);
    expect(await readCsv('nome;cidade\nMaria;Recife\n', 'cidade')).toHaveLength(1);
  });
});

describe('an .xlsx whose first sheet has a header and no rows', () => {
  it('names the other sheets and --sheet', async () => {
    const wb = new ExcelJS.Workbook();
    wb.addWorksheet('Capa').addRow(['placa']);
    const other = wb.addWorksheet('Placas');
    other.addRow(['placa']);
    other.addRow(['ABC1D23']);
    const bytes = Buffer.from(await wb.xlsx.writeBuffer());
    await expect(readPlateXlsx(bytes)).rejects.toMatchObject({
      code: 'XLSX_EMPTY',
      message: expect.stringMatching(
        /^sheet "Capa": .*; the workbook also has "Placas": choose one with --sheet NAME$/,
      ),
    });
  });
});

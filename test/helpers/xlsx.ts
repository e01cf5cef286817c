// Workbooks for the Excel tests: one made with exceljs at test time (the other, saved by
// LibreOffice, is test/fixtures/xlsx/libreoffice.xlsx), and a reader for .xlsx exports.
import ExcelJS from 'exceljs';

/**
 * Sheet "Placas": plates as text and as rich text, an integer and a decimal as numbers, a formula
 * with a cached result (and one whose formula, if it were evaluated, would give something else), a
 * date, a boolean, a formula-looking text, a blank row. Sheet "Outra": two more plates.
 */
export async function exceljsWorkbook(): Promise<Buffer> {
  const wb = new ExcelJS.Workbook();
  const ws = wb.addWorksheet('Placas');
  ws.addRow(['id', 'PLACA', 'valor', 'calculado', 'data', 'ok', 'nota']);
  ws.addRow([
    1234567,
    'EXC1A23',
    10.25,
    { formula: 'C2*2', result: 20.5 },
    new Date(Date.UTC(2024, 2, 1)),
    true,
    '=HYPERLINK("http://x")',
  ]);
  ws.addRow([
    2,
    { richText: [{ text: 'EXC' }, { font: { bold: true }, text: '2B34' }] },
    3,
    { formula: '1+1', result: 999 },
    new Date(Date.UTC(2024, 2, 1, 10, 30)),
    false,
    '+55 11',
  ]);
  ws.addRow([]);
  ws.addRow([4, 'exc-3456', -1, { formula: 'NOW()', result: 'cached' }, null, null, '@user']);
  ws.getColumn(5).numFmt = 'dd/mm/yyyy hh:mm';
  const other = wb.addWorksheet('Outra');
  other.addRow(['placa']);
  other.addRow(['OUT1A11']);
  other.addRow(['OUT2B22']);
  return Buffer.from(await wb.xlsx.writeBuffer());
}

/** A sheet's rows as arrays of cell values (1-based cells moved to 0-based). */
export async function sheetValues(bytes: Buffer, sheet?: string): Promise<unknown[][]> {
  const wb = new ExcelJS.Workbook();
  await wb.xlsx.load(bytes as unknown as ArrayBuffer);
  const ws = sheet === undefined ? wb.worksheets[0] : wb.getWorksheet(sheet);
  if (ws === undefined) throw new Error(`no sheet ${sheet}`);
  const out: unknown[][] = [];
  for (let r = 1; r <= ws.rowCount; r++) {
    const row = ws.getRow(r);
    const cells: unknown[] = [];
    for (let c = 1; c <= row.cellCount; c++) cells.push(row.getCell(c).value ?? null);
    out.push(cells);
  }
  return out;
}

// The .xlsx export: the CSV export's columns and rows (CsvLayout decides both) written as typed
// cells with exceljs's streaming writer, so a 100,000-row batch is written row by row (each row
// committed, strings inline rather than in a shared table held to the end) instead of built in
// memory. Sheet "results" holds one row per input row, sheet "rejects" the rejected rows.
//
// Typed cells: numbers as numbers (a result's -5 adds up), times as dates (UTC), flags as
// booleans, everything else as text. Text is always a text cell: exceljs writes a formula only
// when handed {formula}, which nothing here does, so "=cmd|calc" stays the characters a user
// typed and needs no "'" in front as in the CSV.
import type { Writable } from 'node:stream';
import ExcelJS from 'exceljs';
import { type CellValue, type CsvLayout, REJECT_COLUMNS } from './csv.js';
import type { ExportRow, RejectRow } from './types.js';

export const XLSX_CONTENT_TYPE = 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet';

const DATE_FORMAT = 'yyyy-mm-dd hh:mm:ss';

/** Excel's limit for one cell's text; longer text is cut (the JSONL has it whole). */
const MAX_CELL_CHARS = 32_767;

export interface XlsxExportInput {
  layout: CsvLayout;
  rows: AsyncIterable<ExportRow>;
  rejects?: AsyncIterable<RejectRow>;
  /** Called once per row written to "results". */
  onRow?: () => void;
  /** Cut each row to the header's width (a one-pass writer whose layout cannot grow). */
  cutToHeader?: boolean;
}

/**
 * Writes the workbook to `out` and resolves when it is complete (the stream ended). The layout
 * must have learned the rows already: the header is written first and cannot change.
 */
export async function writeXlsx(out: Writable, input: XlsxExportInput): Promise<void> {
  const workbook = new ExcelJS.stream.xlsx.WorkbookWriter({ stream: out, useStyles: true, useSharedStrings: false });
  const results = workbook.addWorksheet('results');
  const names = input.layout.names();
  results.addRow(names).commit();
  for await (const row of input.rows) {
    input.onRow?.();
    const values = input.layout.values(row);
    addTyped(results, input.cutToHeader === true ? values.slice(0, names.length) : values);
  }
  results.commit();
  if (input.rejects !== undefined) {
    const rejects = workbook.addWorksheet('rejects');
    rejects.addRow([...REJECT_COLUMNS]).commit();
    for await (const reject of input.rejects)
      addTyped(rejects, [reject.row, reject.input, reject.reason, reject.message]);
    rejects.commit();
  }
  await workbook.commit();
}

function addTyped(sheet: ExcelJS.Worksheet, values: readonly CellValue[]): void {
  // An empty text is an empty cell, as a spreadsheet has it (the CSV's "" between two delimiters).
  const row = sheet.addRow(
    values.map((v) =>
      v === '' ? null : typeof v === 'string' && v.length > MAX_CELL_CHARS ? v.slice(0, MAX_CELL_CHARS) : v,
    ),
  );
  values.forEach((v, i) => {
    if (v instanceof Date) row.getCell(i + 1).numFmt = DATE_FORMAT;
  });
  row.commit();
}

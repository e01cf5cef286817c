// The .xlsx export: the CSV export's columns and rows (CsvLayout decides both) written as typed
// cells with exceljs's streaming writer, so a 100,000-row batch is written row by row (each row
// committed, strings inline rather than in a shared table held to the end) instead of built in
// memory. Sheet "results" holds one row per input row, sheet "rejects" the rejected rows.
//
// Typed cells: numbers as numbers (a result's -5 adds up), times as dates (UTC in the raw layout,
// the VQ_TIME_ZONE wall clock in the readable one), flags as booleans, everything else as text.
// The readable layout (layout.sheet) also freezes and filters its header and fits the widths to
// what the first pass learned: the streaming writer cannot widen a column once rows are written.
// Text is always a text cell: exceljs writes a formula only when handed {formula}, which nothing
// here does, so "=cmd|calc" stays the characters a user typed and needs no "'" in front as in the
// CSV.
import type { Writable } from 'node:stream';
import type ExcelJS from 'exceljs';
import { loadExcel } from '../excel.js';
import type { CellValue, ExportLayout } from './csv.js';
import type { ExportRow, RejectRow } from './types.js';

export const XLSX_CONTENT_TYPE = 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet';

const DATE_FORMAT = 'yyyy-mm-dd hh:mm:ss';

/** Excel's limit for one cell's text; longer text is cut (the JSONL has it whole). */
const MAX_CELL_CHARS = 32_767;

export interface XlsxExportInput {
  layout: ExportLayout;
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
  const workbook = new (await loadExcel()).stream.xlsx.WorkbookWriter({
    stream: out,
    useStyles: true,
    useSharedStrings: false,
  });
  const style = input.layout.sheet;
  const names = input.layout.names();
  const results = addSheet(workbook, style?.results ?? 'results', names, style?.widths());
  const dateFormat = style?.dateFormat ?? DATE_FORMAT;
  for await (const row of input.rows) {
    input.onRow?.();
    const values = input.layout.values(row);
    addTyped(results, input.cutToHeader === true ? values.slice(0, names.length) : values, dateFormat);
  }
  results.commit();
  if (input.rejects !== undefined) {
    const rejectNames = input.layout.rejectNames();
    const widths = style ? rejectNames.map((name, i) => Math.max(name.length + 2, i === 3 ? 40 : 12)) : undefined;
    const rejects = addSheet(workbook, style?.rejects ?? 'rejects', rejectNames, widths);
    for await (const reject of input.rejects)
      addTyped(rejects, [reject.row, reject.input, reject.reason, reject.message], dateFormat);
    rejects.commit();
  }
  await workbook.commit();
}

/**
 * A sheet and its header row; with widths (the readable layout) the header is bold, frozen and
 * filtered, so it stays in view and sorts the rows under it.
 */
function addSheet(
  workbook: ExcelJS.stream.xlsx.WorkbookWriter,
  name: string,
  names: readonly string[],
  widths: readonly number[] | undefined,
): ExcelJS.Worksheet {
  if (widths === undefined) {
    const sheet = workbook.addWorksheet(name);
    sheet.addRow([...names]).commit();
    return sheet;
  }
  const sheet = workbook.addWorksheet(name, {
    views: [{ state: 'frozen', xSplit: 0, ySplit: 1 }],
    // exceljs's types lack the option its streaming writer reads.
    ...({ autoFilter: { from: { row: 1, column: 1 }, to: { row: 1, column: Math.max(1, names.length) } } } as object),
  });
  sheet.columns = widths.map((width) => ({ width }));
  const header = sheet.addRow([...names]);
  header.font = { bold: true };
  header.commit();
  return sheet;
}

function addTyped(sheet: ExcelJS.Worksheet, values: readonly CellValue[], dateFormat: string): void {
  // An empty text is an empty cell, as a spreadsheet has it (the CSV's "" between two delimiters).
  const row = sheet.addRow(
    values.map((v) =>
      v === '' ? null : typeof v === 'string' && v.length > MAX_CELL_CHARS ? v.slice(0, MAX_CELL_CHARS) : v,
    ),
  );
  values.forEach((v, i) => {
    if (v instanceof Date) row.getCell(i + 1).numFmt = dateFormat;
  });
  row.commit();
}

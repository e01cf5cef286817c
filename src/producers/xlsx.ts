// Read plates from an Excel workbook (.xlsx): one sheet (the first visible one, or the one named),
// its cells turned into text the way a person sees them, then the CSV's own header rules
// (csv.ts plateRows: plate column by name or content, extra columns carried) into the same
// InputRow stream. Formulas are never evaluated: a formula cell gives the result Excel or
// LibreOffice stored with it.
//
// The workbook is read whole (exceljs Workbook.xlsx.load) from a size-limited buffer rather than
// with exceljs's streaming WorkbookReader. The streaming reader ties sheet names, dates (which need
// styles.xml) and shared strings to the order of the zip's entries, which differs between writers:
// a sheet stored before styles.xml would read its dates as plain numbers, one stored before its
// workbook.xml relations would have no name for `--sheet`. Correct cells matter more here than
// memory, which stays bounded: the file by maxBytes (VQ_HTTP_BODY_LIMIT for uploads), the
// inflated content by inflatedCap (counted by inflating every entry, zip-check.ts, before exceljs
// inflates any: the sizes a zip declares are never trusted).
//
// Row numbers are the sheet's: `row` counts rows after the header, blank ones included, so a row
// keeps the number the spreadsheet shows (row + 1 with a header on row 1), as for a CSV.

import { createHash } from 'node:crypto';
import type { Readable } from 'node:stream';
import type ExcelJS from 'exceljs';
import { InputError, isVqbError } from '../errors.js';
import { loadExcel } from '../excel.js';
import { DEFAULT_MAX_FIELD_BYTES, type PlateHeader, plateRows } from './csv.js';
import { messageOf } from './csv-records.js';
import type { InputRow } from './types.js';
import { checkZip, inflatedCap } from './zip-check.js';

export const XLSX_MEDIA_TYPE = 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet';

/**
 * Largest workbook file read by default (the CLI and the drop folder; uploads use
 * VQ_HTTP_BODY_LIMIT). Measured: a 100,000-row sheet is 3.4 MB and peaks at ~350 MB of memory
 * while read, so 16 MiB is about half a million rows and under 2 GB; larger lists go as CSV.
 */
export const DEFAULT_MAX_XLSX_BYTES = 16 * 1024 * 1024;

const ZIP_MAGIC = [0x50, 0x4b, 0x03, 0x04] as const;
const EMPTY_ZIP_MAGIC = [0x50, 0x4b, 0x05, 0x06] as const;
const CFB_MAGIC = [0xd0, 0xcf, 0x11, 0xe0, 0xa1, 0xb1, 0x1a, 0xe1] as const;

export interface XlsxReadOptions {
  /** The sheet to read, by name (exactly, else case-insensitively). Default: the first visible sheet. */
  sheet?: string;
  /** The plate column: a header name (case/accent-insensitive) or a 1-based index. Default: detected. */
  column?: string | number;
  /** Largest file, in bytes (default 16 MiB). Larger: XLSX_TOO_LARGE. */
  maxBytes?: number;
  /** Largest cell text, in UTF-8 bytes (default 64 KiB, as a CSV field). Larger: XLSX_FIELD_TOO_LARGE. */
  maxFieldBytes?: number;
}

export interface XlsxHeaderInfo extends PlateHeader {
  format: 'xlsx';
  /** The sheet read. */
  sheet: string;
  /** Every sheet of the workbook, in tab order. */
  sheets: string[];
}

export interface XlsxPlates {
  /** sha256 of the file's bytes and the sheet's name, hex: names the batch as a CSV's digest does. */
  digest: string;
  header: XlsxHeaderInfo;
  rows: AsyncIterable<InputRow>;
}

function startsWith(buf: Buffer, bytes: readonly number[]): boolean {
  return buf.length >= bytes.length && bytes.every((b, i) => buf[i] === b);
}

/** True when the bytes start as a zip archive (every .xlsx is one). */
export function hasZipMagic(head: Buffer): boolean {
  return startsWith(head, ZIP_MAGIC) || startsWith(head, EMPTY_ZIP_MAGIC);
}

/**
 * Whether an upload or a file is a workbook: its media type or name says so, or its first bytes are
 * a zip's (a CSV never starts with "PK\x03\x04"). Anything else is read as CSV.
 */
export function isXlsxInput(hint: {
  fileName?: string | undefined;
  contentType?: string | undefined;
  head?: Buffer | undefined;
}): boolean {
  if (hint.contentType !== undefined && hint.contentType.split(';')[0]?.trim().toLowerCase() === XLSX_MEDIA_TYPE)
    return true;
  if (hint.fileName !== undefined && /\.xlsx$/i.test(hint.fileName)) return true;
  return hint.head !== undefined && hasZipMagic(hint.head);
}

/** Collects the source into one Buffer, refusing more than `maxBytes` as soon as it is passed. */
export async function collectBytes(
  source: Readable | AsyncIterable<unknown>,
  maxBytes: number,
  tooLarge: () => Error = () => xlsxTooLarge(maxBytes),
): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let total = 0;
  for await (const chunk of source as AsyncIterable<unknown>) {
    const buf = Buffer.isBuffer(chunk)
      ? chunk
      : typeof chunk === 'string'
        ? Buffer.from(chunk)
        : Buffer.from(chunk as Uint8Array);
    total += buf.length;
    if (total > maxBytes) throw tooLarge();
    chunks.push(buf);
  }
  return Buffer.concat(chunks, total);
}

function xlsxTooLarge(maxBytes: number): InputError {
  return new InputError(
    'XLSX_TOO_LARGE',
    `the workbook is larger than ${maxBytes} bytes: split it, or save the sheet as CSV (read as a ` +
      `stream, no size limit)`,
  );
}

/**
 * Reads a workbook's plates. Resolves once the sheet is loaded and its header known; `rows` yields
 * the rows and may be iterated once. Every failure is an InputError with a stable code:
 * XLSX_INVALID (not a workbook, damaged), XLSX_ENCRYPTED (password-protected), XLSX_TOO_LARGE,
 * XLSX_NO_SHEET, XLSX_SHEET_NOT_FOUND, XLSX_EMPTY, XLSX_NO_PLATE_COLUMN, XLSX_FIELD_TOO_LARGE.
 */
export async function readPlateXlsx(
  source: Buffer | Readable | AsyncIterable<Buffer>,
  options: XlsxReadOptions = {},
): Promise<XlsxPlates> {
  try {
    const maxBytes = options.maxBytes ?? DEFAULT_MAX_XLSX_BYTES;
    const bytes = Buffer.isBuffer(source) ? source : await collectBytes(source, maxBytes);
    if (bytes.length > maxBytes) throw xlsxTooLarge(maxBytes);
    const sheet = await loadSheet(bytes, options.sheet);
    // The sheet read is part of the content: another sheet of the same workbook is another batch.
    const digest = createHash('sha256').update(bytes).update(`\0sheet=${sheet.name}`).digest('hex');
    const header: XlsxHeaderInfo = {
      format: 'xlsx',
      sheet: sheet.name,
      sheets: sheet.sheets,
      hasHeader: false,
      plateColumn: '',
      extraColumns: [],
    };
    const records = new SheetRecords(sheet.worksheet);
    const column = options.column !== undefined ? { column: options.column } : {};
    const rows = await plateRows(
      records,
      { ...column, maxFieldBytes: options.maxFieldBytes ?? DEFAULT_MAX_FIELD_BYTES, format: 'XLSX' },
      header,
      () => {},
    ).catch((err: unknown) => {
      throw withOtherSheets(err, sheet.name, sheet.sheets);
    });
    return { digest, header, rows };
  } catch (err) {
    throw asInputError(err);
  }
}

/** An empty sheet in a workbook of several: the error names the others, where the plates may be. */
function withOtherSheets(err: unknown, read: string, sheets: readonly string[]): unknown {
  const others = sheets.filter((name) => name !== read);
  if (!isVqbError(err) || err.code !== 'XLSX_EMPTY' || others.length === 0) return err;
  const names = others.slice(0, 10).map((n) => JSON.stringify(n));
  return new InputError(
    'XLSX_EMPTY',
    `sheet ${JSON.stringify(read)}: ${err.message}; the workbook also has ` +
      `${names.join(', ')}${others.length > 10 ? ', …' : ''}: choose one with --sheet NAME`,
    { cause: err },
  );
}

async function loadSheet(
  bytes: Buffer,
  wanted: string | undefined,
): Promise<{ worksheet: ExcelJS.Worksheet; name: string; sheets: string[] }> {
  if (bytes.length === 0) throw new InputError('XLSX_INVALID', 'the file is empty, not an Excel workbook');
  if (startsWith(bytes, CFB_MAGIC)) {
    // Office encrypts an .xlsx into an OLE container holding an "EncryptedPackage" stream; an old
    // .xls is the same container without it.
    if (bytes.includes(Buffer.from('EncryptedPackage', 'utf16le'))) {
      throw new InputError(
        'XLSX_ENCRYPTED',
        'the workbook is password-protected: open it, remove the password (File > Info > Protect ' +
          'Workbook), save it and send it again',
      );
    }
    throw new InputError(
      'XLSX_INVALID',
      'this is an old Excel .xls workbook, not .xlsx: open it and save it as .xlsx (or as CSV)',
    );
  }
  if (!hasZipMagic(bytes))
    throw new InputError(
      'XLSX_INVALID',
      'not an Excel .xlsx workbook: the file is not a zip archive (an .xlsx always is)',
    );
  await checkWorkbookZip(bytes);
  const workbook = new (await loadExcel()).Workbook();
  try {
    await workbook.xlsx.load(bytes as unknown as ArrayBuffer, {
      ignoreNodes: ['dataValidations', 'conditionalFormatting', 'extLst', 'drawing', 'picture'],
    });
  } catch (err) {
    throw new InputError('XLSX_INVALID', `not a readable .xlsx workbook: ${messageOf(err)}`, { cause: err });
  }
  const all = workbook.worksheets;
  const sheets = all.map((w) => w.name);
  if (all.length === 0)
    throw new InputError('XLSX_NO_SHEET', 'the workbook has no sheet (a zip archive, but not a spreadsheet?)');
  let worksheet: ExcelJS.Worksheet | undefined;
  if (wanted !== undefined) {
    worksheet =
      all.find((w) => w.name === wanted) ?? all.find((w) => w.name.toLowerCase() === wanted.trim().toLowerCase());
    if (worksheet === undefined) {
      throw new InputError(
        'XLSX_SHEET_NOT_FOUND',
        `no sheet named ${JSON.stringify(wanted)}; the workbook has ${sheets.map((n) => JSON.stringify(n)).join(', ')}`,
      );
    }
  } else {
    // The first tab a person sees: hidden sheets (lookup tables, macros' scratch) are skipped.
    worksheet = all.find((w) => w.state === undefined || w.state === 'visible') ?? all[0];
  }
  return { worksheet: worksheet as ExcelJS.Worksheet, name: (worksheet as ExcelJS.Worksheet).name, sheets };
}

/**
 * Refuses a zip that holds no xl/workbook.xml (a zipped CSV, a .docx), and one that really inflates
 * to more than inflatedCap(file size): every entry is inflated and counted (zip-check.ts) before
 * exceljs inflates anything, so the reader only ever holds what was counted.
 */
async function checkWorkbookZip(bytes: Buffer): Promise<void> {
  const { names } = await checkZip(bytes, inflatedCap(bytes.length));
  if (!names.includes('xl/workbook.xml')) {
    const shown = names.slice(0, 3).map((n) => JSON.stringify(n.length > 60 ? `${n.slice(0, 60)}…` : n));
    throw new InputError(
      'XLSX_INVALID',
      `a zip archive, but not an Excel workbook (it holds ` +
        `${shown.join(', ')}${names.length > 3 ? ', …' : ''}): unzip it, or save the sheet as .xlsx or CSV`,
    );
  }
}

/** A sheet's rows as records of text, numbered as the sheet numbers them (blank rows included). */
class SheetRecords {
  readonly #sheet: ExcelJS.Worksheet;
  readonly #last: number;
  #rowNo = 0;

  constructor(sheet: ExcelJS.Worksheet) {
    this.#sheet = sheet;
    this.#last = sheet.rowCount;
  }

  get recordNo(): number {
    return this.#rowNo;
  }

  async next(): Promise<string[] | undefined> {
    if (this.#rowNo >= this.#last) return undefined;
    this.#rowNo++;
    const row = this.#sheet.findRow(this.#rowNo);
    if (row === undefined) return [];
    const cells: string[] = [];
    for (let c = 1; c <= row.cellCount; c++) cells.push(cellText(row.getCell(c).value));
    return cells;
  }
}

/**
 * A cell's value as the text a person reads in it: numbers without exponent or trailing ".0"
 * (an integer stored as a number reads "1234567"), dates as ISO (a date alone "2024-03-01", with a
 * time "2024-03-01T10:30:00"; a sheet's dates have no time zone), booleans TRUE/FALSE, rich text
 * joined, a hyperlink's text, a formula's cached result (never evaluated; none cached reads ""),
 * an error value as shown ("#N/A").
 */
export function cellText(value: ExcelJS.CellValue | undefined): string {
  if (value === null || value === undefined) return '';
  if (typeof value === 'string') return value;
  if (typeof value === 'number') return numberText(value);
  if (typeof value === 'boolean') return value ? 'TRUE' : 'FALSE';
  if (value instanceof Date) return dateText(value);
  if (typeof value === 'object') {
    if ('richText' in value && Array.isArray(value.richText)) return value.richText.map((r) => r.text ?? '').join('');
    if ('formula' in value || 'sharedFormula' in value)
      return cellText((value as { result?: ExcelJS.CellValue }).result);
    if ('hyperlink' in value) return cellText((value as { text?: ExcelJS.CellValue }).text);
    if ('error' in value) return String((value as { error: unknown }).error);
    if ('text' in value) return cellText((value as { text?: ExcelJS.CellValue }).text);
  }
  return '';
}

function numberText(n: number): string {
  if (!Number.isFinite(n)) return '';
  if (Number.isSafeInteger(n)) return n.toFixed(0);
  const text = String(n);
  if (!/e/i.test(text) && Math.abs(n) < Number.MAX_SAFE_INTEGER) return text;
  // 1e-7 or 1.5e+22: written out to the 15 significant digits a spreadsheet keeps, never with an exponent.
  return n.toLocaleString('en-US', { useGrouping: false, maximumSignificantDigits: 15 });
}

function dateText(d: Date): string {
  if (Number.isNaN(d.getTime())) return '';
  const iso = d.toISOString();
  if (iso.endsWith('T00:00:00.000Z')) return iso.slice(0, 10);
  return iso.endsWith('.000Z') ? iso.slice(0, 19) : iso.slice(0, 23);
}

/** Errors of the reader that are not ours (a bug in a library) say so without losing the cause. */
function asInputError(err: unknown): unknown {
  return isVqbError(err)
    ? err
    : new InputError('XLSX_INVALID', `cannot read the workbook: ${messageOf(err)}`, { cause: err });
}

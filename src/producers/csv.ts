// Read plates from a CSV file as a stream: sniff the first 64 KiB (not text? which delimiter?),
// decode (UTF-8 or Windows-1252, decided at the first non-ASCII bytes), parse with csv-parse, find
// the plate column, and yield one InputRow per non-blank record. Memory stays bounded by the
// sniff window plus the largest row allowed, whatever the file size.
//
// Row numbers: `row` counts every record after the header, blank ones included, so a row keeps the
// number a spreadsheet shows for it: spreadsheet row = row + 1 with a header on the first line,
// = row without a header. Blank records (nothing but delimiters and spaces) are skipped, leaving a
// gap in the numbering. A quoted field with line breaks is one record, as in a spreadsheet.
//
// csv-records.ts turns the source into records (byte pump, decoder step, parser adapter); this
// module decides the header, names the columns and builds the rows.

import { createHash } from 'node:crypto';
import type { Readable } from 'node:stream';
import { isErrorCode } from '../error-codes.js';
import { InputError, isVqbError } from '../errors.js';
import { checkPlate } from '../plates.js';
import { decideHeader, type HeaderDecision, mostlyPlates, uniqueNames } from './csv-header.js';
import { BytePump, CsvRecords, decodeText, messageOf } from './csv-records.js';
import {
  assertLooksLikeText,
  type CsvDelimiter,
  type CsvEncoding,
  detectDelimiter,
  EncodingDecoder,
  hasUtf8Bom,
  SNIFF_BYTES,
} from './csv-sniff.js';
import type { InputRow } from './types.js';

export { findPlateHeader, headerKey } from './csv-header.js';
export { detectDelimiter } from './csv-sniff.js';

export interface CsvReadOptions {
  /** The plate column: a header name (case/accent-insensitive) or a 1-based index. Default: detected. */
  column?: string | number;
  /** Largest field, in UTF-8 bytes (default 64 KiB). Larger: CSV_FIELD_TOO_LARGE. */
  maxFieldBytes?: number;
  /**
   * Largest record the parser will buffer (default 1 MiB, never below maxFieldBytes). Larger:
   * CSV_ROW_TOO_LARGE, or CSV_FIELD_TOO_LARGE when one field alone is past its limit. Counted in
   * UTF-8 bytes for the field being read plus characters for the fields before it.
   */
  maxRowBytes?: number;
}

export interface CsvHeaderInfo {
  delimiter: CsvDelimiter;
  /**
   * Decided at the first non-ASCII bytes. When the first 64 KiB are plain ASCII this says 'utf-8'
   * until later bytes decide otherwise; the object is updated in place while rows are read.
   */
  encoding: CsvEncoding;
  hasHeader: boolean;
  plateColumn: string;
  /** Other columns, in input order. Rows wider than the header append `colN` here as they are read. */
  extraColumns: string[];
}

export const DEFAULT_MAX_FIELD_BYTES = 64 * 1024;
export const DEFAULT_MAX_ROW_BYTES = 1024 * 1024;

/**
 * Start reading a plate CSV. Resolves once the header is known (the first one or two non-blank
 * records have been read); `rows` yields the rest and may be iterated once. Iterate it to the end
 * or break out of the loop: either closes the source. Every failure is an InputError with a stable
 * code (CSV_EMPTY, CSV_BINARY, CSV_UNSUPPORTED_ENCODING, CSV_MIXED_ENCODING, CSV_FIELD_TOO_LARGE,
 * CSV_ROW_TOO_LARGE, CSV_NO_PLATE_COLUMN, CSV_UNREADABLE); rows yielded before a failure are valid.
 */
export async function readPlateCsv(
  source: Readable | AsyncIterable<Buffer>,
  options: CsvReadOptions = {},
): Promise<{ header: CsvHeaderInfo; rows: AsyncIterable<InputRow> }> {
  const maxField = options.maxFieldBytes ?? DEFAULT_MAX_FIELD_BYTES;
  const maxRecord = Math.max(options.maxRowBytes ?? DEFAULT_MAX_ROW_BYTES, maxField);
  const pump = new BytePump(source);
  let cleanup = () => pump.close();
  try {
    const sniff = await pump.head(SNIFF_BYTES);
    if (sniff.length === 0) throw new InputError('CSV_EMPTY', 'the file is empty');
    assertLooksLikeText(sniff);

    const header: CsvHeaderInfo = {
      delimiter: detectDelimiter(sniff.subarray(hasUtf8Bom(sniff) ? 3 : 0).toString('latin1')),
      encoding: 'utf-8',
      hasHeader: false,
      plateColumn: '',
      extraColumns: [],
    };
    const decoder = new EncodingDecoder((encoding) => {
      header.encoding = encoding;
    });
    const records = new CsvRecords(decodeText(pump, sniff, decoder), {
      delimiter: header.delimiter,
      maxFieldBytes: maxField,
      maxRecordBytes: maxRecord,
    });
    const stop = () => {
      records.close();
      pump.close();
    };
    cleanup = stop;

    const rows = await plateRows(
      records,
      { ...(options.column !== undefined ? { column: options.column } : {}), maxFieldBytes: maxField },
      header,
      stop,
    );
    return { header, rows };
  } catch (err) {
    cleanup();
    throw isVqbError(err)
      ? err
      : new InputError('CSV_UNREADABLE', `cannot read the input: ${messageOf(err)}`, { cause: err });
  }
}

/** Records of a plate file, one at a time: CSV records from csv-parse, or a sheet's rows. */
export interface PlateRecords {
  /** The next record (its cells as text), or undefined at the end. */
  next(): Promise<string[] | undefined>;
  /** The number of the record last returned by next(), counting from 1 (blank records included). */
  readonly recordNo: number;
}

/** What the header decision fills in: the parts of CsvHeaderInfo (and XlsxHeaderInfo) every format shares. */
export interface PlateHeader {
  hasHeader: boolean;
  plateColumn: string;
  /** How the plate column was chosen (HeaderDecision.foundBy); set with plateColumn. */
  plateColumnFoundBy?: HeaderDecision['foundBy'];
  extraColumns: string[];
}

/**
 * The header rules every plate file follows, whatever its format: the first two non-blank records
 * decide the header and the plate column (csv-header.ts), columns are named (ColumnNames), blank
 * records are skipped but counted. Fills `header` in place and resolves once it is known; the rows
 * may be iterated once, and `stop` is called when they end or the caller breaks out. `format`
 * prefixes the error codes (CSV_EMPTY, XLSX_EMPTY, …).
 */
export async function plateRows(
  records: PlateRecords,
  options: { column?: string | number; maxFieldBytes: number; format?: 'CSV' | 'XLSX' },
  header: PlateHeader,
  stop: () => void,
): Promise<AsyncIterable<InputRow>> {
  const format = options.format ?? 'CSV';
  const maxField = options.maxFieldBytes;
  const what = format === 'CSV' ? 'the file' : 'the sheet';
  const early: { recordNo: number; cells: string[] }[] = [];
  while (early.length < 2) {
    const cells = await records.next();
    if (cells === undefined) break;
    if (isBlank(cells)) continue;
    checkFieldSizes(cells, `record ${records.recordNo}`, maxField, format);
    early.push({ recordNo: records.recordNo, cells });
  }
  const first = early[0];
  if (first === undefined) throw new InputError(`${format}_EMPTY`, `${what} has no rows, only blank lines`);
  let decision: HeaderDecision;
  try {
    decision = decideHeader(first.cells, early[1]?.cells, options.column);
  } catch (err) {
    // The rules are the CSV's; the code names the format the user sent.
    if (format !== 'CSV' && isVqbError(err)) {
      const renamed = err.code.replace(/^CSV_/, `${format}_`);
      if (renamed !== err.code && isErrorCode(renamed)) throw new InputError(renamed, err.message, { cause: err });
    }
    throw err;
  }
  header.hasHeader = decision.hasHeader;
  // `early` holds every non-blank record when there are fewer than two: a header alone is a
  // file of no rows, refused like an empty one (it would be a finished batch of nothing).
  if (decision.hasHeader && early.length === 1) {
    const names = first.cells.slice(0, 5).map((c) => (c.length > 40 ? `${c.slice(0, 40)}…` : c.trim()));
    throw new InputError(
      `${format}_EMPTY`,
      `${what} has a header (${names.join(', ')}${first.cells.length > 5 ? ', …' : ''}) but no rows`,
    );
  }
  const offset = decision.hasHeader ? first.recordNo : 0;
  if (decision.hasHeader) early.shift();
  const columns = new ColumnNames(decision, first.cells, header.extraColumns);
  header.plateColumn = columns.nameOf(decision.plateIndex);
  header.plateColumnFoundBy = decision.foundBy;
  const seen = new ColumnCheck(decision, first.cells, columns);

  const toRow = (no: number, cells: string[]): InputRow | undefined => {
    if (isBlank(cells)) return undefined;
    const row = no - offset;
    checkFieldSizes(cells, `row ${row}`, maxField, format);
    const input = columns.row(row, cells);
    seen.count(input.input);
    return input;
  };

  let iterated = false;
  async function* rows(): AsyncGenerator<InputRow> {
    if (iterated) throw new Error('plateRows: rows can be iterated only once');
    iterated = true;
    try {
      for (const { recordNo: no, cells } of early.splice(0)) {
        const row = toRow(no, cells);
        if (row !== undefined) yield row;
      }
      for (;;) {
        const cells = await records.next();
        if (cells === undefined) break;
        const row = toRow(records.recordNo, cells);
        if (row !== undefined) yield row;
      }
      seen.assertPlates(format, what);
    } finally {
      stop();
    }
  }
  return { [Symbol.asyncIterator]: rows };
}

/**
 * A plate column chosen by its content (no --column, no plate header name) must hold mostly plates
 * over the whole file; otherwise the file is refused, naming the columns it has, before anything
 * is stored or paid for (every door reads a file to its end before ingest).
 */
class ColumnCheck {
  #rows = 0;
  #plates = 0;
  constructor(
    private readonly decision: HeaderDecision,
    private readonly firstCells: readonly string[],
    private readonly columns: ColumnNames,
  ) {}

  count(input: string): void {
    if (this.decision.foundBy !== 'content') return;
    this.#rows++;
    if (checkPlate(input).ok) this.#plates++;
  }

  assertPlates(format: 'CSV' | 'XLSX', what: string): void {
    if (this.decision.foundBy !== 'content' || mostlyPlates(this.#plates, this.#rows)) return;
    const clip = (c: string) => JSON.stringify(c.length > 30 ? `${c.slice(0, 30)}…` : c);
    const shown = this.firstCells.slice(0, 8).map((cell, i) => {
      const name = this.columns.nameOf(i);
      return this.decision.hasHeader ? clip(name) : `${name} (e.g. ${clip(cell.trim())})`;
    });
    const more = this.firstCells.length > 8 ? `, … (${this.firstCells.length} in all)` : '';
    throw new InputError(
      `${format}_NO_PLATE_COLUMN`,
      `no column of ${what} holds plates: column ${clip(this.columns.nameOf(this.decision.plateIndex))} ` +
        `was picked by its content, but only ${this.#plates} of its ${this.#rows} rows hold a valid plate; ` +
        `the columns are ${shown.join(', ')}${more}. Name the plate column (--column NAME or N) if it is one of them`,
    );
  }
}

/**
 * Column naming: the header's names (made unique) or none, then `colN` (1-based) for every
 * column past them, never `__proto__` and never a name already taken. Columns wider than the
 * header are added to `extraColumns` (the header info's list) as rows reveal them.
 */
class ColumnNames {
  readonly #names: string[];
  readonly #taken: Set<string>;
  readonly #width: number;
  readonly #plateIndex: number;
  readonly #extraColumns: string[];

  constructor(decision: HeaderDecision, firstCells: readonly string[], extraColumns: string[]) {
    this.#names = decision.hasHeader ? uniqueNames(firstCells) : [];
    this.#taken = new Set(['__proto__', ...this.#names]);
    this.#width = decision.hasHeader ? this.#names.length : firstCells.length;
    this.#plateIndex = decision.plateIndex;
    this.#extraColumns = extraColumns;
    for (let i = 0; i < this.#width; i++) {
      const name = this.nameOf(i);
      if (i !== this.#plateIndex) extraColumns.push(name);
    }
  }

  nameOf(i: number): string {
    const names = this.#names;
    let name = names[i];
    if (name !== undefined) return name;
    for (let j = names.length; j <= i; j++) {
      name = `col${j + 1}`;
      while (this.#taken.has(name)) name = `${name}_`;
      this.#taken.add(name);
      names.push(name);
      if (j !== this.#plateIndex && j >= this.#width) this.#extraColumns.push(name);
    }
    return names[i] as string;
  }

  /** The record as an InputRow: the plate cell, and every other cell by its column's name. */
  row(row: number, cells: readonly string[]): InputRow {
    const extra: Record<string, string> = {};
    const n = Math.max(cells.length, this.#width);
    for (let i = 0; i < n; i++) {
      if (i !== this.#plateIndex) extra[this.nameOf(i)] = cells[i] ?? '';
    }
    return { row, input: cells[this.#plateIndex] ?? '', extra };
  }
}

/** Blank: nothing but delimiters and spaces. */
function isBlank(cells: readonly string[]): boolean {
  return cells.every((c) => c.trim() === '');
}

function checkFieldSizes(cells: readonly string[], where: string, maxField: number, format: 'CSV' | 'XLSX'): void {
  cells.forEach((cell, i) => {
    if (cell.length * 3 <= maxField) return;
    const bytes = Buffer.byteLength(cell);
    if (bytes > maxField) {
      throw new InputError(
        `${format}_FIELD_TOO_LARGE`,
        `${where}, column ${i + 1}: a field of ${bytes} bytes, the limit is ${maxField} (maxFieldBytes)`,
      );
    }
  });
}

/**
 * Reads a whole CSV once, only to check it, and returns the sha256 of its bytes. Files are checked
 * in full before anything is enqueued, so a file found unusable halfway (a NUL byte after 8,000
 * good rows) costs nothing; the digest names the batch.
 */
export async function checkCsv(source: AsyncIterable<Buffer>, options: CsvReadOptions = {}): Promise<string> {
  const hash = createHash('sha256');
  async function* tap(): AsyncGenerator<Buffer> {
    for await (const chunk of source) {
      hash.update(chunk);
      yield chunk;
    }
  }
  const { rows } = await readPlateCsv(tap(), options);
  for await (const _ of rows) {
    // reading is the check
  }
  return hash.digest('hex');
}

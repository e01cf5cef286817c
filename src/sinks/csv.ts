// The CSV export's layout: fixed columns, then the user's own input columns, then the upstream
// result flattened to `result.a.b` columns. The result columns are learned from the rows first
// (their number follows the result schema, not the row count) in first-seen order, so the same
// stored outcomes always give the same columns and the same bytes.

import { type Stringifier, stringify } from 'csv-stringify';
import type { ExportRow, RejectRow } from './types.js';

export type CsvDelimiter = ',' | ';' | '\t';

export const BASE_COLUMNS = [
  'row',
  'input',
  'plate',
  'status',
  'query_id',
  'error_code',
  'error_message',
  'possible_duplicate',
  'duplicate_of',
  'same_vehicle_as',
  'reused',
  'enqueued_at',
  'created_at',
  'finished_at',
  'requests',
  'key',
] as const;

export const REJECT_COLUMNS = ['row', 'input', 'reason', 'message'] as const;

/** Result columns beyond this many are left out of the CSV (the JSONL has the whole result). */
export const DEFAULT_MAX_RESULT_COLUMNS = 1000;

/**
 * Excel-friendly CSV: UTF-8 BOM (so accents open right), CRLF, fields with the delimiter, quotes or
 * line breaks quoted. pt-BR Excel splits columns on `;`, not `,`: pass `;` for files users open by
 * double-click. Formula escaping is not done here but by CsvLayout and rejectCells (escapeFormula),
 * which still know whether a cell was a number or text.
 */
export function csvStringifier(delimiter: CsvDelimiter): Stringifier {
  return stringify({
    delimiter,
    record_delimiter: '\r\n',
    quote_record_delimiter: true, // a lone \n or \r inside a field must be quoted too
    bom: true,
  });
}

// A tab or CR first, or = + - @ (or their full-width forms, which some Excel locales read as the
// same) after any leading whitespace: spreadsheets skip the whitespace and still run the formula.
const FORMULA_START = /^(?:[\t\r]|\s*[=+\-@\uFF1D\uFF0B\uFF0D\uFF20])/;

/**
 * Text a spreadsheet could run as a formula, prefixed with `'` so it shows as text (OWASP "CSV
 * injection"). For text only: numbers from the upstream are written as they are, so -5 stays a
 * number a spreadsheet can add up.
 */
export function escapeFormula(text: string): string {
  return FORMULA_START.test(text) ? `'${text}` : text;
}

/** A cell of a typed export (.xlsx): text, a number, a boolean, a date, or empty. */
export type CellValue = string | number | boolean | Date | null;

/**
 * Calls `leaf` for every value of a JSON result: objects are walked, arrays kept whole (JSON text).
 * Each leaf is its typed value: finite numbers and booleans stay what they are, arrays and other
 * values become JSON text, an empty object '{}'. Nothing escaped (csvCell escapes for the CSV).
 */
export function flattenValues(value: unknown, path: string, leaf: (path: string, value: CellValue) => void): void {
  if (value === undefined) return;
  if (value !== null && typeof value === 'object' && !Array.isArray(value)) {
    const keys = Object.keys(value);
    if (keys.length === 0) {
      leaf(path, '{}');
      return;
    }
    for (const key of keys) flattenValues((value as Record<string, unknown>)[key], `${path}.${key}`, leaf);
    return;
  }
  if (value === null) leaf(path, null);
  else if (
    (typeof value === 'number' && Number.isFinite(value)) ||
    typeof value === 'boolean' ||
    typeof value === 'string'
  )
    leaf(path, value);
  else if (typeof value === 'bigint') leaf(path, String(value));
  else leaf(path, JSON.stringify(value) ?? '');
}

const isResultName = (name: string) => name === 'result' || name.startsWith('result.');

/**
 * The columns of an export, CSV or .xlsx: CsvLayout (VQ_EXPORT_LAYOUT=raw) or ReadableLayout
 * (readable.ts). `learn` every row first, then `names`/`header` and `values`/`cells`.
 */
export interface ExportLayout {
  /** Result columns were left out because there were more than the cap. */
  truncated: boolean;
  /** A row met in values() had a column learn() had not seen: write the file again. */
  missed: boolean;
  learn(row: ExportRow): boolean;
  names(): string[];
  header(): string[];
  values(row: ExportRow): CellValue[];
  cells(row: ExportRow): string[];
  /** The rejects' header. */
  rejectNames(): string[];
  /** How the .xlsx presents it; none: plain sheets "results" and "rejects", times as UTC dates. */
  readonly sheet?:
    | {
        results: string;
        rejects: string;
        /** Excel's number format for times. */
        dateFormat: string;
        /** Each column's width in characters, once every row is learned. */
        widths(): number[];
      }
    | undefined;
}

/**
 * The columns of one CSV export. `learn` every row first, then `header` and `cells`. A row met in
 * `cells` with a column not learned (the batch moved on between passes) is learned then, and
 * `missed` turns true: the caller writes the file again with the wider layout.
 */
export class CsvLayout implements ExportLayout {
  readonly sheet = undefined;
  private readonly extraKeys: string[];
  private readonly extraSet: Set<string>;
  private readonly resultPaths: string[] = [];
  private readonly resultSet = new Set<string>();
  private readonly maxResultColumns: number;
  /** Result columns were left out because there were more than maxResultColumns. */
  truncated = false;
  missed = false;

  constructor(extraColumns: readonly string[], maxResultColumns = DEFAULT_MAX_RESULT_COLUMNS) {
    this.extraKeys = [...new Set(extraColumns)];
    this.extraSet = new Set(this.extraKeys);
    this.maxResultColumns = maxResultColumns;
  }

  /** Returns true when the row brought a column not seen before. */
  learn(row: ExportRow): boolean {
    let added = false;
    for (const key of Object.keys(row.extra)) {
      if (!this.extraSet.has(key)) {
        this.extraSet.add(key);
        this.extraKeys.push(key);
        added = true;
      }
    }
    flattenValues(row.result, 'result', (path) => {
      if (this.resultSet.has(path)) return;
      if (this.resultPaths.length >= this.maxResultColumns) {
        this.truncated = true;
        return;
      }
      this.resultSet.add(path);
      this.resultPaths.push(path);
      added = true;
    });
    return added;
  }

  /**
   * Base columns, then input columns under their own names (prefixed `input_` when a name is a
   * base column, `result` or `result.…`, or already used), then `result.…` columns; each name
   * escaped as a cell.
   */
  header(): string[] {
    return this.names().map(escapeFormula);
  }

  /** The header's names as they are (header() escapes them for the CSV). */
  names(): string[] {
    const used = new Set<string>(BASE_COLUMNS);
    const extras = this.extraKeys.map((key) => {
      let name = key;
      while (used.has(name) || isResultName(name)) name = `input_${name}`;
      used.add(name);
      return name;
    });
    return [...BASE_COLUMNS, ...extras, ...this.resultPaths];
  }

  /**
   * The row's cells typed, for a spreadsheet: the same columns as cells(), numbers as numbers,
   * times as Dates, flags as booleans, text unescaped (a typed writer stores text as text, so
   * nothing in it can become a formula).
   */
  values(row: ExportRow): CellValue[] {
    if (this.learn(row)) this.missed = true;
    const result = new Map<string, CellValue>();
    flattenValues(row.result, 'result', (path, value) => result.set(path, value));
    const time = (ms: number | undefined) => (ms !== undefined && Number.isFinite(ms) ? new Date(ms) : null);
    return [
      row.row,
      row.input,
      row.plate,
      row.status,
      row.queryId ?? null,
      row.error?.code ?? null,
      row.error?.message ?? null,
      row.possibleDuplicate === true ? true : null,
      row.duplicateOf ?? null,
      row.sameVehicleAs ?? null,
      row.reused === true ? true : null,
      time(row.enqueuedAt),
      time(row.createdAt),
      time(row.finishedAt),
      row.requests ?? null,
      row.key ?? null,
      ...this.extraKeys.map((key) => (Object.hasOwn(row.extra, key) ? (row.extra[key] ?? '') : '')),
      ...this.resultPaths.map((path) => result.get(path) ?? null),
    ];
  }

  rejectNames(): string[] {
    return [...REJECT_COLUMNS];
  }

  /** The row's cells, escaped: what goes into the file as it is (values() as CSV text). */
  cells(row: ExportRow): string[] {
    return this.values(row).map(csvCell);
  }
}

/** A typed cell as the CSV writes it: text escaped, times ISO, empty for none. */
function csvCell(value: CellValue): string {
  if (value === null) return '';
  if (typeof value === 'string') return escapeFormula(value);
  if (value instanceof Date) return value.toISOString();
  return String(value);
}

export function rejectCells(reject: RejectRow): string[] {
  return [String(reject.row), escapeFormula(reject.input), escapeFormula(reject.reason), escapeFormula(reject.message)];
}

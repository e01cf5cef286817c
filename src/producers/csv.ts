// Read plates from a CSV file as a stream: sniff the first 64 KiB (not text? which delimiter?),
// decode (UTF-8 or Windows-1252, decided at the first non-ASCII bytes), parse with csv-parse, find
// the plate column, and yield one InputRow per non-blank record. Memory stays bounded by the
// sniff window plus the largest row allowed, whatever the file size.
//
// Row numbers: `row` counts every record after the header, blank ones included, so a row keeps the
// number a spreadsheet shows for it: spreadsheet row = row + 1 with a header on the first line,
// = row without a header. Blank records (nothing but delimiters and spaces) are skipped, leaving a
// gap in the numbering. A quoted field with line breaks is one record, as in a spreadsheet.

import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import { parse, type Parser } from 'csv-parse';
import { InputError, isVqbError } from '../errors.js';
import { decideHeader, uniqueNames } from './csv-header.js';
import { EncodingDecoder, SNIFF_BYTES, assertLooksLikeText, assertNoNul, detectDelimiter, hasUtf8Bom, type CsvDelimiter, type CsvEncoding } from './csv-sniff.js';
import type { InputRow } from './types.js';

export { detectDelimiter } from './csv-sniff.js';
export { findPlateHeader, headerKey } from './csv-header.js';

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
export async function readPlateCsv(source: Readable | AsyncIterable<Buffer>, options: CsvReadOptions = {}): Promise<{ header: CsvHeaderInfo; rows: AsyncIterable<InputRow> }> {
  const maxField = options.maxFieldBytes ?? DEFAULT_MAX_FIELD_BYTES;
  const maxRecord = Math.max(options.maxRowBytes ?? DEFAULT_MAX_ROW_BYTES, maxField);
  const input = bufferChunks(source)[Symbol.asyncIterator]();
  let closed = false;
  const close = (): void => {
    if (closed) return;
    closed = true;
    // Destroy a stream directly: return() on a generator waiting for a chunk would wait with it.
    if (source instanceof Readable) source.destroy();
    void input.return?.(undefined).catch(() => {});
  };

  let cleanup = close;
  try {
    const firstChunks: Buffer[] = [];
    let headBytes = 0;
    let ended = false;
    while (headBytes < SNIFF_BYTES) {
      const next = await input.next();
      if (next.done === true) {
        ended = true;
        break;
      }
      firstChunks.push(next.value);
      headBytes += next.value.length;
    }
    const sniff = Buffer.concat(firstChunks);
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

    async function* text(): AsyncGenerator<string> {
      try {
        let offset = sniff.length;
        const first = decoder.decode(sniff);
        if (first !== '') yield first;
        while (!ended) {
          const next = await input.next();
          if (next.done === true) break;
          assertNoNul(next.value, offset);
          offset += next.value.length;
          const chunk = decoder.decode(next.value);
          if (chunk !== '') yield chunk;
        }
        const last = decoder.end();
        if (last !== '') yield last;
      } finally {
        close();
      }
    }

    // Records are taken out of csv-parse as it finds them (on_record) rather than read from its
    // stream side: a parse error destroys the stream and would drop records read before it.
    const queue: string[][] = [];
    let head = 0;
    const csv = parse({
      delimiter: header.delimiter,
      record_delimiter: ['\r\n', '\n', '\r'],
      relax_column_count: true,
      relax_quotes: true,
      skip_empty_lines: false, // we skip blank records ourselves, counting them
      max_record_size: maxRecord,
      on_record: (record: string[]) => {
        queue.push(record);
        return null;
      },
    });
    csv.on('error', () => {}); // taken from the write/end callbacks below
    csv.resume();
    const feed = (chunk: string | undefined) =>
      new Promise<unknown>((resolve) => {
        if (chunk !== undefined) {
          csv.write(chunk, (err) => resolve(err ?? undefined));
        } else {
          csv.once('error', resolve);
          csv.end(() => resolve(undefined));
        }
      });

    const chunks = text();
    let recordNo = 0;
    let finished = false;
    let failure: unknown;
    /** The next record, or undefined at the end. Records before a failure come out first. */
    const pull = async (): Promise<string[] | undefined> => {
      for (;;) {
        const cells = queue[head];
        if (cells !== undefined) {
          head++;
          if (head === queue.length) {
            queue.length = 0;
            head = 0;
          }
          recordNo++;
          return cells;
        }
        if (failure !== undefined) throw failure;
        if (finished) return undefined;
        try {
          const next = await chunks.next();
          if (next.done === true) finished = true;
          const err = await feed(next.done === true ? undefined : next.value);
          if (err !== undefined) failure = toInputError(err, csv, maxField, recordNo + queue.length - head + 1);
        } catch (err) {
          failure = toInputError(err, csv, maxField, recordNo + queue.length - head + 1);
        }
      }
    };
    const stop = () => {
      csv.destroy();
      void chunks.return(undefined).catch(() => {});
      close();
    };
    cleanup = stop;
    const isBlank = (cells: readonly string[]) => cells.every((c) => c.trim() === '');
    const checkSizes = (cells: readonly string[], where: string) => {
      cells.forEach((cell, i) => {
        if (cell.length * 3 <= maxField) return;
        const bytes = Buffer.byteLength(cell);
        if (bytes > maxField) {
          throw new InputError('CSV_FIELD_TOO_LARGE', `${where}, column ${i + 1}: a field of ${bytes} bytes, the limit is ${maxField} (maxFieldBytes)`);
        }
      });
    };

    // The first two non-blank records decide the header and the plate column.
    const early: { recordNo: number; cells: string[] }[] = [];
    while (early.length < 2) {
      const cells = await pull();
      if (cells === undefined) break;
      if (isBlank(cells)) continue;
      checkSizes(cells, `record ${recordNo}`);
      early.push({ recordNo, cells });
    }
    const first = early[0];
    if (first === undefined) throw new InputError('CSV_EMPTY', 'the file has no rows, only blank lines');
    const decision = decideHeader(first.cells, early[1]?.cells, options.column);
    header.hasHeader = decision.hasHeader;
    const plateIndex = decision.plateIndex;
    const offset = decision.hasHeader ? first.recordNo : 0;
    if (decision.hasHeader) early.shift();

    const names = decision.hasHeader ? uniqueNames(first.cells) : [];
    const taken = new Set(['__proto__', ...names]);
    const width = decision.hasHeader ? names.length : first.cells.length;
    const nameOf = (i: number): string => {
      let name = names[i];
      if (name !== undefined) return name;
      for (let j = names.length; j <= i; j++) {
        name = `col${j + 1}`;
        while (taken.has(name)) name = `${name}_`;
        taken.add(name);
        names.push(name);
        if (j !== plateIndex && j >= width) header.extraColumns.push(name);
      }
      return names[i] as string;
    };
    for (let i = 0; i < width; i++) {
      const name = nameOf(i);
      if (i !== plateIndex) header.extraColumns.push(name);
    }
    header.plateColumn = nameOf(plateIndex);

    const toRow = (no: number, cells: string[]): InputRow | undefined => {
      if (isBlank(cells)) return undefined;
      const row = no - offset;
      checkSizes(cells, `row ${row}`);
      const extra: Record<string, string> = {};
      const n = Math.max(cells.length, width);
      for (let i = 0; i < n; i++) {
        if (i !== plateIndex) extra[nameOf(i)] = cells[i] ?? '';
      }
      return { row, input: cells[plateIndex] ?? '', extra };
    };

    let iterated = false;
    async function* rows(): AsyncGenerator<InputRow> {
      if (iterated) throw new Error('readPlateCsv: rows can be iterated only once');
      iterated = true;
      try {
        for (const { recordNo: no, cells } of early.splice(0)) {
          const row = toRow(no, cells);
          if (row !== undefined) yield row;
        }
        for (;;) {
          const cells = await pull();
          if (cells === undefined) return;
          const row = toRow(recordNo, cells);
          if (row !== undefined) yield row;
        }
      } finally {
        stop();
      }
    }
    return { header, rows: { [Symbol.asyncIterator]: rows } };
  } catch (err) {
    cleanup();
    throw isVqbError(err) ? err : new InputError('CSV_UNREADABLE', `cannot read the input: ${describe(err)}`, { cause: err });
  }
}

/** Chunks as Buffers of at most 64 KiB (views, not copies), so one huge chunk cannot fill the record queue. */
async function* bufferChunks(source: AsyncIterable<unknown>): AsyncGenerator<Buffer> {
  for await (const chunk of source) {
    let buf: Buffer;
    if (Buffer.isBuffer(chunk)) buf = chunk;
    else if (typeof chunk === 'string') buf = Buffer.from(chunk, 'utf8');
    else if (chunk instanceof Uint8Array) buf = Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    else throw new InputError('CSV_UNREADABLE', `expected bytes from the input, got ${typeof chunk}`);
    for (let i = 0; i < buf.length; i += SNIFF_BYTES) yield buf.subarray(i, i + SNIFF_BYTES);
  }
}

function describe(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** Our own errors pass through; csv-parse's become InputError with our codes. */
function toInputError(err: unknown, parser: Parser, maxField: number, recordNo: number): unknown {
  if (isVqbError(err)) return err;
  const code = (err as { code?: unknown } | null)?.code;
  if (code === 'CSV_MAX_RECORD_SIZE') {
    // csv-parse keeps the field being read in `state.field` (a byte buffer).
    const fieldBytes = (parser as unknown as { state?: { field?: { length?: number } } }).state?.field?.length ?? 0;
    if (fieldBytes > maxField) {
      return new InputError('CSV_FIELD_TOO_LARGE', `record ${recordNo}: a field larger than ${maxField} bytes (maxFieldBytes); an unclosed quote does this too`, { cause: err });
    }
    return new InputError('CSV_ROW_TOO_LARGE', `record ${recordNo}: the row is larger than maxRowBytes; an unclosed quote does this too`, { cause: err });
  }
  return new InputError('CSV_UNREADABLE', `cannot parse the CSV at record ${recordNo}: ${describe(err)}`, { cause: err });
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

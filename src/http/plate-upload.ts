// An uploaded plate file, CSV or Excel, whichever door it came through (a text/csv or .xlsx
// request body, a form's `file` part, the web console's upload): told apart by media type, file
// name or the zip magic bytes, then read in full, counted against VQ_HTTP_BODY_LIMIT and
// VQ_HTTP_MAX_PLATES, before anything is enqueued (see csv-body.ts).
import type { Readable } from 'node:stream';
import type { InputRow } from '../producers/types.js';
import { collectBytes, isXlsxInput, readPlateXlsx } from '../producers/xlsx.js';
import { bodyTooLarge, type CsvBody, readCsvBody, tooManyPlates } from './csv-body.js';

export interface PlateUploadOptions {
  bodyLimit: number;
  maxPlates: number;
  /** The plate column, by header name or 1-based index (as text, as a query or form field gives it). */
  column?: string;
  /** An .xlsx file's sheet, by name; ignored for a CSV. */
  sheet?: string;
}

/**
 * Reads an uploaded file: `fileName` and `contentType` as the client gave them (either may be
 * missing). A workbook is an .xlsx name, the .xlsx media type, or bytes starting as a zip; anything
 * else is read as CSV. Errors are ours: 413 PAYLOAD_TOO_LARGE / TOO_MANY_PLATES, CSV_… or XLSX_….
 */
export async function readPlateUpload(
  body: Readable | AsyncIterable<Buffer>,
  fileName: string | undefined,
  contentType: string | undefined,
  options: PlateUploadOptions,
): Promise<CsvBody> {
  const { head, rest } = await peek(body);
  if (!isXlsxInput({ fileName, contentType, head })) {
    const column = options.column !== undefined ? { column: options.column } : {};
    return readCsvBody(rest, { bodyLimit: options.bodyLimit, maxPlates: options.maxPlates, ...column });
  }
  const bytes = await collectBytes(rest, options.bodyLimit, () => bodyTooLarge(options.bodyLimit));
  const column =
    options.column === undefined
      ? {}
      : { column: /^\d+$/.test(options.column) ? Number(options.column) : options.column };
  const xlsx = await readPlateXlsx(bytes, {
    maxBytes: options.bodyLimit,
    ...column,
    ...(options.sheet !== undefined ? { sheet: options.sheet } : {}),
  });
  const rows: InputRow[] = [];
  for await (const row of xlsx.rows) {
    if (rows.length >= options.maxPlates) throw tooManyPlates(options.maxPlates);
    rows.push(row);
  }
  return { digest: xlsx.digest, header: xlsx.header, rows };
}

/** The first chunk (to sniff) and the whole stream again, that chunk included. */
async function peek(
  body: Readable | AsyncIterable<Buffer>,
): Promise<{ head: Buffer | undefined; rest: AsyncIterable<Buffer> }> {
  const iterator = (body as AsyncIterable<Buffer>)[Symbol.asyncIterator]();
  const first = await iterator.next();
  const head = first.done === true ? undefined : Buffer.from(first.value);
  async function* rest(): AsyncGenerator<Buffer> {
    if (head === undefined) return;
    yield head;
    for (;;) {
      const next = await iterator.next();
      if (next.done === true) return;
      yield next.value;
    }
  }
  return { head, rest: rest() };
}

// A text/csv request body, streamed into the CSV reader. Bytes are counted against the body limit
// (fastify's limit covers only bodies it buffers itself) and hashed for the content-derived batch
// id. Rows are collected before anything is enqueued: the batch id is only known once the last
// byte is hashed, and a request that fails half way (too many plates, a broken row) enqueues
// nothing. Memory is bounded by VQ_HTTP_BODY_LIMIT and VQ_HTTP_MAX_PLATES.
import { createHash } from 'node:crypto';
import type { Readable } from 'node:stream';
import { type CsvHeaderInfo, readPlateCsv } from '../producers/csv.js';
import type { InputRow } from '../producers/types.js';
import type { XlsxHeaderInfo } from '../producers/xlsx.js';
import { ApiError } from './errors.js';

export interface CsvBody {
  /** sha256 of the body's bytes, hex. */
  digest: string;
  /** A CSV's header, or an .xlsx upload's (plate-upload.ts reads both into this shape). */
  header: CsvHeaderInfo | XlsxHeaderInfo;
  rows: InputRow[];
}

export function bodyTooLarge(limit: number): ApiError {
  return new ApiError('PAYLOAD_TOO_LARGE', `the body is larger than ${limit} bytes (VQ_HTTP_BODY_LIMIT)`);
}

export function tooManyPlates(limit: number): ApiError {
  return new ApiError(
    'TOO_MANY_PLATES',
    `more than ${limit} plates in one request (VQ_HTTP_MAX_PLATES); split the list`,
  );
}

/**
 * A CSV that a client sent as a JSON string: `"placa\nABC1D23\n…"`, quotes around it and its line
 * breaks escaped. A generated client does this with a string body (its serializer JSON-encodes
 * whatever it is given). Read as CSV it is one quoted cell, a batch of no plates; it is refused.
 */
export function csvJsonEncoded(): ApiError {
  return new ApiError(
    'CSV_JSON_ENCODED',
    "the body is a JSON string, not CSV (a client JSON-encoded the file): send the file's bytes as " +
      'they are (text/csv with a body serializer that passes the text through, or ' +
      'multipart/form-data with the file as `file`), or JSON {"plates": [...]}',
  );
}

/** True for a body that is one JSON string holding line breaks (see csvJsonEncoded); `text` may be cut short. */
export function looksJsonEncoded(text: string): boolean {
  const t = text.replace(/^\uFEFF/, '').trim();
  if (!t.startsWith('"') || /[\r\n]/.test(t)) return false;
  try {
    const value: unknown = JSON.parse(t);
    return typeof value === 'string' && /[\r\n]/.test(value);
  } catch {
    // Cut short by an error or the size limit: an escaped line break on one line says enough.
    return /\\[rn]/.test(t);
  }
}

export async function readCsvBody(
  body: Readable | AsyncIterable<Buffer>,
  options: { bodyLimit: number; maxPlates: number; column?: string },
): Promise<CsvBody> {
  const hash = createHash('sha256');
  let bytes = 0;
  // The body while it is one line (a JSON-encoded CSV has no raw line break): bounded by bodyLimit.
  let oneLine: Buffer[] | undefined = [];
  async function* metered(): AsyncGenerator<Buffer> {
    for await (const chunk of body as AsyncIterable<Buffer>) {
      bytes += chunk.length;
      if (oneLine !== undefined) {
        if (chunk.includes(0x0a) || chunk.includes(0x0d)) oneLine = undefined;
        else oneLine.push(chunk);
      }
      if (bytes > options.bodyLimit) throw bodyTooLarge(options.bodyLimit);
      hash.update(chunk);
      yield chunk;
    }
  }
  const jsonEncoded = () => oneLine !== undefined && looksJsonEncoded(Buffer.concat(oneLine).toString('utf8'));
  const column =
    options.column === undefined ? undefined : /^\d+$/.test(options.column) ? Number(options.column) : options.column;
  let header: CsvHeaderInfo;
  const collected: InputRow[] = [];
  try {
    const csv = await readPlateCsv(metered(), column === undefined ? {} : { column });
    header = csv.header;
    for await (const row of csv.rows) {
      if (collected.length >= options.maxPlates) throw tooManyPlates(options.maxPlates);
      collected.push(row);
    }
  } catch (err) {
    throw jsonEncoded() ? csvJsonEncoded() : err;
  }
  if (jsonEncoded()) throw csvJsonEncoded();
  return { digest: hash.digest('hex'), header, rows: collected };
}

// A text/csv request body, streamed into the CSV reader. Bytes are counted against the body limit
// (fastify's limit covers only bodies it buffers itself) and hashed for the content-derived batch
// id. Rows are collected before anything is enqueued: the batch id is only known once the last
// byte is hashed, and a request that fails half way (too many plates, a broken row) enqueues
// nothing. Memory is bounded by VQ_HTTP_BODY_LIMIT and VQ_HTTP_MAX_PLATES.
import { createHash } from 'node:crypto';
import type { Readable } from 'node:stream';
import { readPlateCsv, type CsvHeaderInfo } from '../producers/csv.js';
import type { InputRow } from '../producers/types.js';
import { ApiError } from './errors.js';

export interface CsvBody {
  /** sha256 of the body's bytes, hex. */
  digest: string;
  header: CsvHeaderInfo;
  rows: InputRow[];
}

export function bodyTooLarge(limit: number): ApiError {
  return new ApiError(413, 'PAYLOAD_TOO_LARGE', `the body is larger than ${limit} bytes (VQ_HTTP_BODY_LIMIT)`);
}

export function tooManyPlates(limit: number): ApiError {
  return new ApiError(413, 'TOO_MANY_PLATES', `more than ${limit} plates in one request (VQ_HTTP_MAX_PLATES); split the list`);
}

export async function readCsvBody(body: Readable, options: { bodyLimit: number; maxPlates: number; column?: string }): Promise<CsvBody> {
  const hash = createHash('sha256');
  let bytes = 0;
  async function* metered(): AsyncGenerator<Buffer> {
    for await (const chunk of body as AsyncIterable<Buffer>) {
      bytes += chunk.length;
      if (bytes > options.bodyLimit) throw bodyTooLarge(options.bodyLimit);
      hash.update(chunk);
      yield chunk;
    }
  }
  const column = options.column === undefined ? undefined : /^\d+$/.test(options.column) ? Number(options.column) : options.column;
  const { header, rows } = await readPlateCsv(metered(), column === undefined ? {} : { column });
  const collected: InputRow[] = [];
  for await (const row of rows) {
    if (collected.length >= options.maxPlates) throw tooManyPlates(options.maxPlates);
    collected.push(row);
  }
  return { digest: hash.digest('hex'), header, rows: collected };
}

// A batch's results as a streamed response, in the file sink's formats (jsonl.ts and csv.ts do the
// formatting). While a batch runs the rows are a snapshot: unfinished plates are `pending`.
import { PassThrough, pipeline, Readable } from 'node:stream';
import type { FastifyBaseLogger } from 'fastify';
import type { OutcomeStore } from '../queue/batch/outcomes.js';
import type { BatchKey, BatchStore } from '../queue/batch/store.js';
import type { Lang } from '../words.js';
import type { BatchArchive } from './archive.js';
import { type CsvDelimiter, CsvLayout, csvStringifier, REJECT_COLUMNS, rejectCells } from './csv.js';
import { exportSourceFor } from './export.js';
import { jsonlChunks } from './jsonl.js';
import { withWords } from './reject-words.js';
import type { ExportFormat, ExportSource } from './types.js';
import { writeXlsx, XLSX_CONTENT_TYPE } from './xlsx.js';

export interface ResultsBody {
  contentType: string;
  fileName: string;
  body: Readable;
}

/** Throws BatchNotFoundError (404) before anything is sent. */
export async function batchResults(
  services: { batches: BatchStore; outcomes: OutcomeStore },
  batch: BatchKey,
  format: ExportFormat,
  delimiter: CsvDelimiter,
  logger: Pick<FastifyBaseLogger, 'warn'>,
  archive?: BatchArchive,
  lang: Lang = 'en',
): Promise<ResultsBody> {
  // An archived batch (deleted from Redis by retention) streams from its archive.
  const exported = await exportSourceFor(services, batch, archive);
  const batchId = exported.batchId;
  const source = withWords(exported, lang);
  const fileName = `${safeName(batchId)}.${format}`;
  if (format === 'jsonl') {
    return {
      contentType: 'application/x-ndjson; charset=utf-8',
      fileName,
      body: Readable.from(jsonlChunks(source.rows(), source.extraColumns)),
    };
  }
  if (format === 'xlsx') {
    const layout = new CsvLayout(source.extraColumns);
    for await (const row of source.rows()) layout.learn(row);
    const body = new PassThrough();
    // Written while the response is sent; a failure half way cuts the response, as for the CSV.
    // (exceljs's zip stream does not wait for a slow client: what it has not taken is buffered.)
    writeXlsx(body, { layout, rows: source.rows(), rejects: source.rejects(), cutToHeader: true }).catch(
      (err: unknown) => {
        logger.warn({ batchId, err: err instanceof Error ? err.message : String(err) }, 'results stream failed');
        body.destroy(err instanceof Error ? err : new Error(String(err)));
      },
    );
    return { contentType: XLSX_CONTENT_TYPE, fileName, body };
  }
  const body = csvBody(await csvRecords(source), delimiter, (err) =>
    logger.warn({ batchId, err: err.message }, 'results stream failed'),
  );
  return { contentType: CSV_CONTENT_TYPE, fileName, body };
}

/**
 * A batch's rejected rows as a streamed CSV (the file sink's rejects columns). Throws
 * BatchNotFoundError (404) before anything is sent.
 */
export async function batchRejects(
  services: { batches: BatchStore; outcomes: OutcomeStore },
  batch: BatchKey,
  delimiter: CsvDelimiter,
  logger: Pick<FastifyBaseLogger, 'warn'>,
  archive?: BatchArchive,
  lang: Lang = 'en',
): Promise<ResultsBody> {
  const exported = await exportSourceFor(services, batch, archive);
  const batchId = exported.batchId;
  const source = withWords(exported, lang);
  const records = (async function* () {
    yield [...REJECT_COLUMNS];
    for await (const reject of source.rejects()) yield rejectCells(reject);
  })();
  const body = csvBody(records, delimiter, (err) =>
    logger.warn({ batchId, err: err.message }, 'rejects stream failed'),
  );
  return { contentType: CSV_CONTENT_TYPE, fileName: `${safeName(batchId)}.rejects.csv`, body };
}

const CSV_CONTENT_TYPE = 'text/csv; charset=utf-8';

/**
 * The records as CSV text, streamed. pipeline, not pipe: an error on either side (Redis gone
 * mid-stream) destroys both, and the client sees a cut response rather than a hang.
 */
function csvBody(records: AsyncIterable<string[]>, delimiter: CsvDelimiter, onError: (err: Error) => void): Readable {
  const stringifier = csvStringifier(delimiter);
  pipeline(Readable.from(records), stringifier, (err) => {
    if (err) onError(err);
  });
  return stringifier;
}

const safeName = (batchId: string): string => batchId.replace(/[^A-Za-z0-9._-]/g, '_');

/**
 * Two passes over the rows, as the file sink does: the first learns the result columns, the second
 * writes. The header cannot be rewritten once sent, so a row that finished between the passes with
 * result fields never seen before loses those cells here (the JSONL has them). Only result columns
 * can appear late: the input columns are fixed by the source, and result columns come last, so
 * cutting a row to the header's width keeps every cell under its own name.
 */
async function csvRecords(source: ExportSource): Promise<AsyncIterable<string[]>> {
  const layout = new CsvLayout(source.extraColumns);
  for await (const row of source.rows()) layout.learn(row);
  const header = layout.header();
  return (async function* () {
    yield header;
    for await (const row of source.rows()) yield layout.cells(row).slice(0, header.length);
  })();
}

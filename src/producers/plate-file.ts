// A plate file on disk, CSV or Excel: which it is (the .xlsx extension, or a zip's magic bytes,
// which no CSV starts with), checked in full once (its sha256 names the batch), then read for
// ingest. The CLI (`vqb run`) and the drop folder go through here.
import { createReadStream } from 'node:fs';
import { open } from 'node:fs/promises';
import { type CsvReadOptions, checkCsv, type PlateHeader, readPlateCsv } from './csv.js';
import type { InputRow } from './types.js';
import { isXlsxInput, readPlateXlsx } from './xlsx.js';

export type PlateFileFormat = 'csv' | 'xlsx';

export interface PlateFileOptions extends CsvReadOptions {
  /** An .xlsx file's sheet, by name (default: the first visible). Ignored for a CSV. */
  sheet?: string;
  /** Chunks of the file, if not read from `path` (the drop folder passes its own reader). */
  chunks?: (path: string) => AsyncIterable<Buffer>;
}

/** CSV or .xlsx: by the name (`name`, else the path), else by the first bytes. */
export async function plateFileFormat(
  path: string,
  options: Pick<PlateFileOptions, 'chunks'> & { name?: string } = {},
): Promise<PlateFileFormat> {
  if (isXlsxInput({ fileName: options.name ?? path })) return 'xlsx';
  if (options.chunks !== undefined) {
    // The loop's end closes the file.
    for await (const chunk of options.chunks(path)) return isXlsxInput({ head: chunk }) ? 'xlsx' : 'csv';
    return 'csv';
  }
  const handle = await open(path, 'r');
  try {
    const head = Buffer.alloc(4);
    const { bytesRead } = await handle.read(head, 0, 4, 0);
    return isXlsxInput({ head: head.subarray(0, bytesRead) }) ? 'xlsx' : 'csv';
  } finally {
    await handle.close();
  }
}

function source(path: string, options: PlateFileOptions): AsyncIterable<Buffer> {
  return options.chunks?.(path) ?? createReadStream(path);
}

function csvOptions(options: PlateFileOptions): CsvReadOptions {
  const { sheet: _sheet, chunks: _chunks, ...rest } = options;
  return rest;
}

/** Reads the whole file once, only to check it; returns its sha256. Failures are InputErrors (CSV_… or XLSX_…). */
export async function checkPlateFile(
  path: string,
  format: PlateFileFormat,
  options: PlateFileOptions = {},
): Promise<string> {
  if (format === 'csv') return checkCsv(source(path, options), csvOptions(options));
  const { digest, rows } = await readPlateXlsx(source(path, options), xlsxOptions(options));
  for await (const _ of rows) {
    // reading is the check
  }
  return digest;
}

/** The file's header and rows, for ingest. */
export async function readPlateFile(
  path: string,
  format: PlateFileFormat,
  options: PlateFileOptions = {},
): Promise<{ header: PlateHeader; rows: AsyncIterable<InputRow> }> {
  if (format === 'csv') return readPlateCsv(source(path, options), csvOptions(options));
  return readPlateXlsx(source(path, options), xlsxOptions(options));
}

function xlsxOptions(options: PlateFileOptions) {
  return {
    ...(options.sheet !== undefined ? { sheet: options.sheet } : {}),
    ...(options.column !== undefined ? { column: options.column } : {}),
    ...(options.maxFieldBytes !== undefined ? { maxFieldBytes: options.maxFieldBytes } : {}),
  };
}

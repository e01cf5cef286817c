// Exports as files in one directory: <batchId>.jsonl, <batchId>.csv and <batchId>.rejects.csv,
// and <batchId>.xlsx (results and rejects as two sheets) when asked for.
// Each file is written under a hidden temporary name in the same directory and renamed over the
// final name only once every requested file is complete, so a reader never sees half a file and a
// failed export leaves the previous one in place. Rows are streamed with backpressure (pipeline),
// so memory does not grow with the batch.
//
// Passes over source.rows(): the first writes the JSONL (if asked) while learning the CSV's result
// columns; the second writes the CSV, a third the .xlsx. Without JSONL the first pass only learns.

import { randomBytes } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdir, rename, rm } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { Readable, type Transform, type Writable } from 'node:stream';
import { finished, pipeline } from 'node:stream/promises';
import { isVqbError, VqbError } from '../errors.js';
import type { Lang } from '../words.js';
import { type CsvDelimiter, CsvLayout, csvStringifier, type ExportLayout, rejectCells } from './csv.js';
import { jsonlChunks } from './jsonl.js';
import { ReadableLayout } from './readable.js';
import { withWords } from './reject-words.js';
import type { ExportFormat, ExportResult, ExportRow, ExportSink, ExportSource, RejectRow } from './types.js';
import { writeXlsx } from './xlsx.js';

/** The file operations FileSink needs; tests may pass one that fails on purpose. */
export interface FileSinkFs {
  createWriteStream(path: string, options: { flags: string; flush: boolean }): Writable;
  rename(from: string, to: string): Promise<void>;
  rm(path: string, options: { force: boolean }): Promise<void>;
  mkdir(path: string, options?: { recursive?: boolean }): Promise<unknown>;
}

export const nodeFs: FileSinkFs = { createWriteStream, rename, rm, mkdir };

export interface FileSinkOptions {
  /** Output directory (created if missing). */
  dir: string;
  fs?: FileSinkFs;
  /** CSV delimiter, default `,`. pt-BR Excel opens `;` files into columns on double-click. */
  csvDelimiter?: CsvDelimiter;
  /** Cap on `result.…` columns in the CSV (default 1000); the JSONL always has the whole result. */
  maxResultColumns?: number;
  /**
   * How the CSV and .xlsx read (VQ_EXPORT_LAYOUT, VQ_LANG, VQ_TIME_ZONE): `readable` for people,
   * else the raw layout of csv.ts. Without it (the archive, which reads its files back) the raw
   * layout, with the messages as stored.
   */
  words?: { layout: ExportLayoutName; lang: Lang; timeZone: string };
}

export type ExportLayoutName = 'readable' | 'raw';

/** Times the CSV (or .xlsx) is written when rows gain columns between passes (a batch still running). */
const CSV_ATTEMPTS = 3;

const SAFE_ID = /^[A-Za-z0-9_-][A-Za-z0-9._-]{0,199}$/;

export class FileSink implements ExportSink {
  private readonly dir: string;
  private readonly fs: FileSinkFs;
  private readonly delimiter: CsvDelimiter;
  private readonly maxResultColumns: number | undefined;
  private readonly words: FileSinkOptions['words'];

  constructor(opts: FileSinkOptions) {
    this.words = opts.words;
    this.dir = resolve(opts.dir);
    this.fs = opts.fs ?? nodeFs;
    this.delimiter = opts.csvDelimiter ?? ',';
    this.maxResultColumns = opts.maxResultColumns;
  }

  async write(stored: ExportSource, formats: readonly ExportFormat[]): Promise<ExportResult> {
    // Rejects and failures in the reader's language, in every file (the codes stay as they are).
    const source = this.words === undefined ? stored : withWords(stored, this.words.lang);
    const id = source.fileName ?? source.batchId;
    // The id becomes a file name: no separators, no leading dot, nothing that climbs out of dir.
    if (!SAFE_ID.test(id))
      throw new VqbError('EXPORT_BAD_BATCH_ID', `batch id ${JSON.stringify(id)} cannot be used as a file name`);
    try {
      await makeDir(this.fs, this.dir);
    } catch (err) {
      throw unusableDir(this.dir, err);
    }

    const staged: { tmp: string; final: string }[] = [];
    const stage = (name: string) => {
      const entry = {
        tmp: join(this.dir, `.${name}.tmp-${randomBytes(6).toString('hex')}`),
        final: join(this.dir, name),
      };
      staged.push(entry);
      return entry;
    };
    const files: ExportResult['files'] = {};
    let rows = 0;
    const count = () => {
      rows++;
    };

    try {
      const layout = formats.includes('csv') || formats.includes('xlsx') ? this.layoutFor(source) : undefined;
      if (formats.includes('jsonl')) {
        const file = stage(`${id}.jsonl`);
        await this.writeFile(
          file.tmp,
          jsonlChunks(source.rows(), source.extraColumns, (row) => {
            count();
            layout?.learn(row);
          }),
        );
        files.jsonl = file.final;
      } else if (layout !== undefined) {
        for await (const row of source.rows()) layout.learn(row);
      }

      if (layout !== undefined && formats.includes('csv')) {
        const csv = stage(`${id}.csv`);
        await untilStable(id, layout, async () => {
          rows = 0;
          await this.writeFile(csv.tmp, csvRecords(layout, source.rows(), count), csvStringifier(this.delimiter));
        });
        files.csv = csv.final;
        const rejects = stage(`${id}.rejects.csv`);
        await this.writeFile(rejects.tmp, rejectRecords(layout, source.rejects()), csvStringifier(this.delimiter));
        files.rejects = rejects.final;
      }

      if (layout !== undefined && formats.includes('xlsx')) {
        const xlsx = stage(`${id}.xlsx`);
        await untilStable(id, layout, async () => {
          rows = 0;
          const out = this.fs.createWriteStream(xlsx.tmp, { flags: 'w', flush: true });
          const closed = finished(out);
          closed.catch(() => {}); // awaited below; an early failure must not be unhandled meanwhile
          try {
            await writeXlsx(out, { layout, rows: source.rows(), rejects: source.rejects(), onRow: count });
          } catch (err) {
            out.destroy();
            throw err;
          }
          await closed;
        });
        files.xlsx = xlsx.final;
      }

      for (const { tmp, final } of staged) await this.fs.rename(tmp, final);
      return { files, rows };
    } catch (err) {
      await Promise.all(staged.map(({ tmp }) => this.fs.rm(tmp, { force: true }).catch(() => {})));
      // File-system failures (full disk, read-only, the directory gone) become one readable line.
      throw isVqbError(err) || typeof (err as { code?: unknown }).code !== 'string' ? err : unusableDir(this.dir, err);
    }
  }

  private layoutFor(source: ExportSource): ExportLayout {
    const max = this.maxResultColumns;
    if (this.words?.layout !== 'readable') return new CsvLayout(source.extraColumns, max);
    const { lang, timeZone } = this.words;
    return new ReadableLayout(source.extraColumns, {
      lang,
      timeZone,
      ...(max !== undefined ? { maxResultColumns: max } : {}),
    });
  }

  private async writeFile(path: string, chunks: AsyncIterable<string | string[]>, encode?: Transform): Promise<void> {
    // flush: fsync before close, so the rename never publishes a file whose data is still in cache.
    const out = this.fs.createWriteStream(path, { flags: 'w', flush: true });
    const input = Readable.from(chunks);
    if (encode === undefined) await pipeline(input, out);
    else await pipeline(input, encode, out);
  }
}

/**
 * Writes a file with the layout's columns, again when rows gained columns the header lacked
 * (a batch still running), at most CSV_ATTEMPTS times.
 */
async function untilStable(id: string, layout: ExportLayout, write: () => Promise<void>): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    layout.missed = false;
    await write();
    if (!layout.missed) return;
    if (attempt >= CSV_ATTEMPTS) {
      throw new VqbError(
        'EXPORT_SOURCE_UNSTABLE',
        `batch ${id}: rows kept gaining columns between passes; export again when the batch is finished`,
      );
    }
  }
}

/**
 * The folder and any missing parents, one level at a time. Node's recursive mkdir never returns
 * where a folder cannot be made although its parent exists (`/proc/x` answers ENOENT, and it
 * retries for ever); a level that exists (EEXIST) is passed, a file there fails the write after.
 */
export async function makeDir(fs: Pick<FileSinkFs, 'mkdir'>, dir: string): Promise<void> {
  const levels: string[] = [];
  for (let at = dir; ; at = dirname(at)) {
    levels.unshift(at);
    if (dirname(at) === at) break;
  }
  for (const level of levels) {
    try {
      await fs.mkdir(level);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
  }
}

function unusableDir(dir: string, cause: unknown): VqbError {
  const code = (cause as { code?: string }).code ?? 'unknown';
  const why =
    code === 'EEXIST' || code === 'ENOTDIR'
      ? 'it is not a directory'
      : code === 'ENOSPC'
        ? 'the disk is full'
        : code === 'EACCES' || code === 'EROFS'
          ? 'it is not writable'
          : `the file system said ${code}`;
  return new VqbError(
    'EXPORT_DIR_UNUSABLE',
    `cannot write exports to ${dir}: ${why} (set VQ_OUT_DIR or --out; the stored outcomes are safe, ` +
      `run \`vqb export <batch>\` again)`,
    {
      cause,
    },
  );
}

async function* csvRecords(
  layout: ExportLayout,
  rows: AsyncIterable<ExportRow>,
  onRow: () => void,
): AsyncGenerator<string[]> {
  yield layout.header();
  for await (const row of rows) {
    onRow();
    yield layout.cells(row);
  }
}

async function* rejectRecords(layout: ExportLayout, rejects: AsyncIterable<RejectRow>): AsyncGenerator<string[]> {
  yield layout.rejectNames();
  for await (const reject of rejects) yield rejectCells(reject);
}

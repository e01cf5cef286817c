// A batch's long-term record on disk, once Redis lets go of it: `<archive>/<batchId>/` holds the
// same files `vqb export` writes (JSONL, CSV, rejects CSV) and a manifest.json naming each file's
// bytes, sha256 and row count, with the batch as it was last stored. The folder is built under a
// hidden temporary name and renamed into place whole, and `verify` reads every file back before
// retention may delete anything (retention.ts). Archived batches are still served: the JSONL
// holds every field of every row, so `source()` turns it back into the rows any sink formats.
import { createHash, randomBytes } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdir, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { parse } from 'csv-parse';
import { clock } from '../clock.js';
import { ArchiveError, isVqbError } from '../errors.js';
import type { BatchInfo } from '../queue/batch/store.js';
import type { ResultRow } from '../schemas/result-row.js';
import type { DeliveryRecord } from '../webhooks/deliveries.js';
import type { CsvDelimiter } from './csv.js';
import { FileSink } from './file-sink.js';
import type { ExportFormat, ExportRow, ExportSource, RejectRow } from './types.js';

export const MANIFEST = 'manifest.json';
export const ARCHIVE_FORMATS: readonly ExportFormat[] = ['csv', 'jsonl'];

export type ArchiveFileKind = 'jsonl' | 'csv' | 'rejects';

export interface ArchiveFile {
  name: string;
  kind: ArchiveFileKind;
  bytes: number;
  sha256: string;
  /** Data rows (the CSVs' header not counted). */
  rows: number;
  /** What a row is: `ResultRow/1` (a JSONL line as /openapi.json publishes it), `csv-export/1`, `rejects-csv/1`. */
  schema: string;
}

export interface ArchiveManifest {
  format: 'vqb-batch-archive';
  version: 1;
  batchId: string;
  /** The folder's name when it is not the id (`<id>.<account>`). */
  fileName?: string;
  archivedAt: number;
  csvDelimiter: CsvDelimiter;
  /** The batch as Redis last held it (counts included), for `GET /v1/batches/:id` and `vqb status`. */
  batch: BatchInfo;
  files: ArchiveFile[];
  /** What became of the batch's webhooks (its callbackUrl), as its status showed them. */
  webhooks?: DeliveryRecord[];
}

/** What the rows must add up to, taken from Redis before anything is deleted. */
export interface ArchiveExpectation {
  /** Input rows: one JSONL line and one CSV row each. */
  rows: number;
  /** Plates with an outcome (done + failed): the JSONL rows whose status is done or failed. */
  outcomes: number;
  rejected: number;
}

const SCHEMAS: Record<ArchiveFileKind, string> = {
  jsonl: 'ResultRow/1',
  csv: 'csv-export/1',
  rejects: 'rejects-csv/1',
};
/** A batch id, or `<id>.<account>` (a batch whose id another account held first). */
const SAFE_ID = /^[A-Za-z0-9_-]{1,100}(\.[a-z0-9][a-z0-9_-]{0,31})?$/;

export interface BatchArchiveOptions {
  dir: string;
  csvDelimiter: CsvDelimiter;
  now?: () => number;
}

export class BatchArchive {
  readonly dir: string;
  readonly #delimiter: CsvDelimiter;
  readonly #now: () => number;

  constructor(options: BatchArchiveOptions) {
    this.dir = resolve(options.dir);
    this.#delimiter = options.csvDelimiter;
    this.#now = options.now ?? clock.now;
  }

  folder(batchId: string): string {
    return join(this.dir, batchId);
  }

  /**
   * Writes the batch's exports and manifest under a temporary name, then renames the folder into
   * place (replacing an earlier archive of the same batch: Redis still held the batch, so it is
   * the newer truth). With `expected`, the archive is verified in place (see verify) before the one
   * it replaced is removed; if it does not read back right, the earlier one is put back. Throws
   * ArchiveError, with nothing half-written left under the final name.
   */
  async write(
    source: ExportSource,
    info: BatchInfo,
    expected?: ArchiveExpectation,
    webhooks?: DeliveryRecord[],
  ): Promise<ArchiveManifest> {
    const id = source.fileName ?? source.batchId;
    if (!SAFE_ID.test(id)) throw new ArchiveError(id, 'the id cannot be used as a folder name');
    const tmp = join(this.dir, `.${id}.tmp-${randomBytes(6).toString('hex')}`);
    try {
      await mkdir(tmp, { recursive: true });
      const written = await new FileSink({ dir: tmp, csvDelimiter: this.#delimiter }).write(source, ARCHIVE_FORMATS);
      const files: ArchiveFile[] = [];
      for (const [kind, path] of Object.entries(written.files) as [ArchiveFileKind, string][]) {
        const name = path.slice(tmp.length + 1);
        files.push({ name, kind, ...(await this.#measure(join(tmp, name), kind)), schema: SCHEMAS[kind] });
      }
      const manifest: ArchiveManifest = {
        format: 'vqb-batch-archive',
        version: 1,
        batchId: source.batchId,
        ...(id !== source.batchId ? { fileName: id } : {}),
        archivedAt: this.#now(),
        csvDelimiter: this.#delimiter,
        batch: info,
        files,
        ...(webhooks !== undefined && webhooks.length > 0 ? { webhooks } : {}),
      };
      await writeFile(join(tmp, MANIFEST), `${JSON.stringify(manifest, null, 2)}\n`, { flush: true });
      const final = this.folder(id);
      const old = join(this.dir, `.${id}.old-${randomBytes(6).toString('hex')}`);
      const replaced = await rename(final, old).then(
        () => true,
        (err: NodeJS.ErrnoException) => {
          if (err.code === 'ENOENT') return false;
          throw err;
        },
      );
      await rename(tmp, final);
      if (expected !== undefined) {
        try {
          await this.verify(id, expected);
        } catch (err) {
          // The archive it replaced was complete when written: put it back rather than leave a bad one.
          if (replaced) {
            await rm(final, { recursive: true, force: true });
            await rename(old, final);
          }
          throw err;
        }
      }
      if (replaced) await rm(old, { recursive: true, force: true });
      return manifest;
    } catch (err) {
      await rm(tmp, { recursive: true, force: true }).catch(() => {});
      if (isVqbError(err) && err.code === 'ARCHIVE_FAILED') throw err;
      throw new ArchiveError(id, `cannot write ${this.dir}: ${describeFsError(err)} (set VQ_ARCHIVE_DIR)`, {
        cause: err,
      });
    }
  }

  /**
   * Reads every file of the archive back: its bytes and sha256 must be the manifest's, its rows
   * the manifest's and what Redis counted. Throws ArchiveError naming the first difference.
   */
  async verify(batchId: string, expected: ArchiveExpectation): Promise<ArchiveManifest> {
    const manifest = await this.manifest(batchId);
    if (manifest === undefined) throw new ArchiveError(batchId, `no readable ${MANIFEST} in ${this.folder(batchId)}`);
    const kinds = new Set(manifest.files.map((f) => f.kind));
    for (const kind of ['jsonl', 'csv', 'rejects'] as const)
      if (!kinds.has(kind)) throw new ArchiveError(batchId, `the archive has no ${kind} file`);
    for (const file of manifest.files) {
      const path = join(this.folder(batchId), file.name);
      const seen = await this.#measure(path, file.kind).catch((err: unknown) => {
        throw new ArchiveError(batchId, `cannot read ${path}: ${describeFsError(err)}`, { cause: err });
      });
      if (seen.sha256 !== file.sha256 || seen.bytes !== file.bytes)
        throw new ArchiveError(batchId, `${file.name} does not read back as written (sha256 or size differs)`);
      if (seen.rows !== file.rows)
        throw new ArchiveError(batchId, `${file.name} has ${seen.rows} rows, the manifest says ${file.rows}`);
      const want = file.kind === 'rejects' ? expected.rejected : expected.rows;
      if (seen.rows !== want)
        throw new ArchiveError(batchId, `${file.name} has ${seen.rows} rows, Redis holds ${want}`);
    }
    const jsonl = manifest.files.find((f) => f.kind === 'jsonl')!;
    let outcomes = 0;
    let pending = 0;
    for await (const row of jsonlRows(join(this.folder(batchId), jsonl.name))) {
      if (row.status === 'done' || row.status === 'failed' || row.status === 'cancelled') outcomes++;
      else if (row.status === 'pending') pending++;
    }
    if (pending > 0) throw new ArchiveError(batchId, `${pending} rows are still pending`);
    if (outcomes !== expected.outcomes)
      throw new ArchiveError(batchId, `${jsonl.name} has ${outcomes} outcomes, Redis holds ${expected.outcomes}`);
    return manifest;
  }

  /** The archived batch's manifest, or undefined when the batch was never archived here. */
  async manifest(batchId: string): Promise<ArchiveManifest | undefined> {
    if (!SAFE_ID.test(batchId)) return undefined;
    let text: string;
    try {
      text = await readFile(join(this.folder(batchId), MANIFEST), 'utf8');
    } catch {
      return undefined;
    }
    const manifest = JSON.parse(text) as ArchiveManifest;
    return manifest.format === 'vqb-batch-archive' && (manifest.fileName ?? manifest.batchId) === batchId
      ? manifest
      : undefined;
  }

  /**
   * The archived batch of that id that one of `accounts` held (an id is scoped by its account: the
   * archive of another account's batch of that id is not found); without `accounts`, the id's own.
   */
  async manifestFor(batchId: string, accounts?: readonly string[]): Promise<ArchiveManifest | undefined> {
    if (accounts === undefined) return this.manifest(batchId);
    for (const name of [batchId, ...accounts.map((a) => `${batchId}.${a}`)]) {
      const manifest = await this.manifest(name);
      if (manifest !== undefined && accounts.includes(manifest.batch.account)) return manifest;
    }
    return undefined;
  }

  /** Every archived batch id (folders with a manifest), sorted. */
  async list(): Promise<string[]> {
    const names = await readdir(this.dir).catch(() => [] as string[]);
    const ids: string[] = [];
    for (const name of names.filter((n) => SAFE_ID.test(n)).sort()) {
      if (
        await stat(join(this.folder(name), MANIFEST)).then(
          () => true,
          () => false,
        )
      )
        ids.push(name);
    }
    return ids;
  }

  /** The archived rows, as a sink reads them: any export format can be rebuilt from the archive. */
  source(manifest: ArchiveManifest): ExportSource {
    const jsonl = manifest.files.find((f) => f.kind === 'jsonl');
    if (jsonl === undefined) throw new ArchiveError(manifest.batchId, 'the archive has no jsonl file');
    const path = join(this.folder(manifest.fileName ?? manifest.batchId), jsonl.name);
    return {
      batchId: manifest.batchId,
      ...(manifest.fileName !== undefined ? { fileName: manifest.fileName } : {}),
      extraColumns: manifest.batch.extraColumns,
      async *rows(): AsyncIterable<ExportRow> {
        for await (const line of jsonlRows(path)) yield fromResultRow(line);
      },
      async *rejects(): AsyncIterable<RejectRow> {
        for await (const line of jsonlRows(path)) {
          if (line.status === 'rejected')
            yield {
              row: line.row,
              input: line.input,
              reason: line.error?.code ?? '',
              message: line.error?.message ?? '',
            };
        }
      },
    };
  }

  async #measure(path: string, kind: ArchiveFileKind): Promise<{ bytes: number; sha256: string; rows: number }> {
    const hash = createHash('sha256');
    let bytes = 0;
    let lines = 0;
    for await (const chunk of createReadStream(path)) {
      const buffer = chunk as Buffer;
      hash.update(buffer);
      bytes += buffer.length;
      for (let at = buffer.indexOf(10); at !== -1; at = buffer.indexOf(10, at + 1)) lines++;
    }
    let rows = lines;
    if (kind !== 'jsonl') {
      // Records, not lines: a quoted field may hold a line break.
      let records = 0;
      for await (const _ of createReadStream(path).pipe(
        parse({ bom: true, delimiter: this.#delimiter, relax_column_count: true }),
      ))
        records++;
      rows = Math.max(0, records - 1);
    }
    return { bytes, sha256: hash.digest('hex'), rows };
  }
}

async function* jsonlRows(path: string): AsyncGenerator<ResultRow> {
  const lines = createInterface({ input: createReadStream(path, 'utf8'), crlfDelay: Number.POSITIVE_INFINITY });
  for await (const line of lines) if (line !== '') yield JSON.parse(line) as ResultRow;
}

const ms = (iso: string | undefined): number | undefined => (iso === undefined ? undefined : Date.parse(iso));

/** A JSONL line back into the row it was written from (sinks/jsonl.ts jsonlLine, inverted). */
export function fromResultRow(line: ResultRow): ExportRow {
  const extra = Object.create(null) as Record<string, string>;
  for (const [name, value] of Object.entries(line.input_columns ?? {})) extra[name] = value;
  const row: ExportRow = { row: line.row, input: line.input, plate: line.plate, status: line.status, extra };
  if (line.queryId !== undefined) row.queryId = line.queryId;
  if (line.possibleDuplicate !== undefined) row.possibleDuplicate = line.possibleDuplicate;
  if (line.duplicateOf !== undefined) row.duplicateOf = line.duplicateOf;
  if (line.sameVehicleAs !== undefined) row.sameVehicleAs = line.sameVehicleAs;
  if (line.reused !== undefined) row.reused = line.reused;
  if (line.key !== undefined) row.key = line.key;
  if (line.error !== undefined) row.error = { code: line.error.code, message: line.error.message };
  if (line.result !== undefined) row.result = line.result;
  const enqueuedAt = ms(line.enqueuedAt);
  const createdAt = ms(line.createdAt);
  const finishedAt = ms(line.finishedAt);
  if (enqueuedAt !== undefined) row.enqueuedAt = enqueuedAt;
  if (createdAt !== undefined) row.createdAt = createdAt;
  if (finishedAt !== undefined) row.finishedAt = finishedAt;
  if (line.requests !== undefined) row.requests = line.requests;
  return row;
}

function describeFsError(err: unknown): string {
  const code = (err as { code?: string }).code;
  if (code === 'EACCES' || code === 'EROFS' || code === 'EPERM') return 'it is not writable';
  if (code === 'ENOSPC') return 'the disk is full';
  if (code === 'ENOTDIR' || code === 'EEXIST') return 'it is not a directory';
  if (code === 'ENOENT') return 'a file is missing';
  return isVqbError(err)
    ? err.message
    : code !== undefined
      ? `the file system said ${code}`
      : String((err as Error)?.message ?? err);
}

// The ingest step: a generated CSV of distinct valid plates goes through our real ingest path,
// then the same jobs through raw BullMQ addBulk, each in a child process of its own and under a
// prefix of its own; Redis memory is read before and after each, and the keys are deleted (a
// million jobs is about a gigabyte) before the next one starts. Then two parts of the vqb path on
// their own, also in child processes: the CSV reader over the same file (its peak RSS), and the
// dedup table over as many distinct plates (the bytes it keeps per plate).
import { createWriteStream } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { benchPrefix, deleteByPrefix, keyBytes, plateAt, REDIS_URL, settleMemory, usedMemory } from './common.js';
import type { IngestJob, IngestResult } from './ingest-child.js';
import { forkIpc } from './procs.js';
import type { StepContext } from './upstream.js';

const INGEST_MODULE = fileURLToPath(new URL('./ingest-child.js', import.meta.url));

export interface IngestFigures {
  rows: number;
  jobs: number;
  seconds: number;
  rowsPerS: number;
  peakRssMB: number;
  sampledPeakRssMB: number;
  startRssMB: number;
  /** Redis used_memory after minus before, per job enqueued. */
  redisBytesPerJob: number;
  /**
   * vqb only: MEMORY USAGE of the prefix's keys per plate, by part: the scheduler's waiting list,
   * the stored input rows, and the rest (batch hash, the account's queue and its few fed jobs).
   */
  keyBytesPerPlate?: Record<string, number>;
}

/** Which part of a queued batch a key holds (for the vqb breakdown). */
function partOf(key: string): string {
  if (/:sched:pending:/.test(key)) return 'waiting list';
  if (/:batch:[^:]+:rows$/.test(key)) return 'input rows';
  return 'rest';
}

/** readPlateCsv alone over the same file: rows read and dropped, no Redis. */
export interface ReaderFigures {
  rows: number;
  seconds: number;
  rowsPerS: number;
  peakRssMB: number;
  startRssMB: number;
  /** Peak RSS minus the RSS before reading: what the reader itself added. */
  addedRssMB: number;
}

/** The PlateDeduper ingest uses, over `plates` distinct plates. */
export interface DedupFigures {
  plates: number;
  seconds: number;
  /** Heap and array buffers kept after a full collection, per distinct plate. */
  bytesPerPlate: number;
}

/** `placa;cliente` as a pt-BR spreadsheet exports it, one distinct Mercosul plate a row. */
async function writeCsv(path: string, rows: number): Promise<void> {
  const out = createWriteStream(path);
  const write = (text: string) =>
    new Promise<void>((resolve, reject) => out.write(text, (err) => (err ? reject(err) : resolve())));
  await write('placa;cliente\r\n');
  let chunk: string[] = [];
  for (let i = 0; i < rows; i++) {
    chunk.push(`${plateAt(i)};${100_000 + i}\r\n`);
    if (chunk.length === 10_000) {
      await write(chunk.join(''));
      chunk = [];
    }
  }
  if (chunk.length > 0) await write(chunk.join(''));
  await new Promise<void>((resolve, reject) => out.end((err?: Error | null) => (err ? reject(err) : resolve())));
}

async function measureOne(
  ctx: StepContext,
  mode: IngestJob['mode'],
  csv: string,
  rows: number,
): Promise<IngestFigures> {
  const prefix = benchPrefix(`ingest-${mode}`);
  await settleMemory(ctx.redis);
  const before = await usedMemory(ctx.redis);
  const child = forkIpc<IngestResult>(INGEST_MODULE);
  try {
    const job: IngestJob = { mode, csv, rows, prefix, redisUrl: REDIS_URL };
    const r = await child.ask<IngestResult>({ type: 'start', job }, 'result');
    const after = await usedMemory(ctx.redis);
    const parts = mode === 'vqb' ? await keyBytes(ctx.redis, prefix, partOf) : undefined;
    const mb = (bytes: number) => bytes / 2 ** 20;
    return {
      rows: r.rows,
      jobs: r.jobs,
      seconds: r.ms / 1000,
      rowsPerS: r.rows / (r.ms / 1000),
      peakRssMB: mb(r.peakRssBytes),
      sampledPeakRssMB: mb(r.sampledPeakRssBytes),
      startRssMB: mb(r.startRssBytes),
      redisBytesPerJob: (after - before) / Math.max(1, r.jobs),
      ...(parts
        ? {
            keyBytesPerPlate: Object.fromEntries(
              Object.entries(parts).map(([part, bytes]) => [part, bytes / Math.max(1, r.jobs)]),
            ),
          }
        : {}),
    };
  } finally {
    await child.stop();
    const removed = await deleteByPrefix(ctx.redis, prefix);
    await settleMemory(ctx.redis);
    ctx.log(`    removed ${removed} keys under ${prefix}`);
  }
}

/** A child with no Redis: the CSV reader (`read`) or the dedup table (`dedup`). */
async function measureLocal(mode: 'read' | 'dedup', csv: string, rows: number): Promise<IngestResult> {
  const child = forkIpc<IngestResult>(INGEST_MODULE);
  try {
    const job: IngestJob = { mode, csv, rows, prefix: '', redisUrl: REDIS_URL };
    return await child.ask<IngestResult>({ type: 'start', job }, 'result');
  } finally {
    await child.stop();
  }
}

export async function measureReader(csv: string, rows: number): Promise<ReaderFigures> {
  const r = await measureLocal('read', csv, rows);
  if (r.jobs !== rows) throw new Error(`the reader returned ${r.jobs} of ${rows} rows`);
  const mb = (bytes: number) => bytes / 2 ** 20;
  return {
    rows: r.jobs,
    seconds: r.ms / 1000,
    rowsPerS: r.jobs / (r.ms / 1000),
    peakRssMB: mb(r.peakRssBytes),
    startRssMB: mb(r.startRssBytes),
    addedRssMB: mb(r.peakRssBytes - r.startRssBytes),
  };
}

export async function measureDedup(plates: number): Promise<DedupFigures> {
  const r = await measureLocal('dedup', '', plates);
  return { plates: r.jobs, seconds: r.ms / 1000, bytesPerPlate: (r.retainedBytes ?? NaN) / r.jobs };
}

export async function measureIngest(
  ctx: StepContext,
  rows: number,
): Promise<{ vqb: IngestFigures; raw: IngestFigures; reader: ReaderFigures; dedup: DedupFigures }> {
  const dir = await mkdtemp(join(tmpdir(), 'vqb-bench-'));
  try {
    const csv = join(dir, 'plates.csv');
    await writeCsv(csv, rows);
    ctx.log(`    generated ${rows.toLocaleString('en')} rows in ${csv}`);
    const vqb = await measureOne(ctx, 'vqb', csv, rows);
    ctx.log(`    vqb ingest: ${Math.round(vqb.rowsPerS)} rows/s, peak RSS ${vqb.peakRssMB.toFixed(0)} MB`);
    const raw = await measureOne(ctx, 'raw', csv, rows);
    ctx.log(`    raw addBulk: ${Math.round(raw.rowsPerS)} jobs/s`);
    const reader = await measureReader(csv, rows);
    ctx.log(
      `    CSV reader alone: ${Math.round(reader.rowsPerS)} rows/s, peak RSS ${reader.peakRssMB.toFixed(0)} MB (+${reader.addedRssMB.toFixed(0)} MB)`,
    );
    const dedup = await measureDedup(rows);
    ctx.log(`    dedup table: ${dedup.bytesPerPlate.toFixed(1)} bytes per plate`);
    return { vqb, raw, reader, dedup };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

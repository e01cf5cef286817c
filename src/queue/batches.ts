// Batches: what users think in ("this file", "this request"). A batch is a Redis hash of metadata
// and live counts plus the list of its input rows; its plates are jobs on the plate queue. Counts
// move only in Lua scripts or MULTI blocks, so they stay exact with many workers and restarts.
import type { Redis } from 'ioredis';
import { BatchNotFoundError } from '../errors.js';
import { jobIdFor, newJobData, type PlateQueue } from './plate-queue.js';
import type { VqbKeys } from './redis.js';

export type BatchSource = 'file' | 'api' | 'library' | 'inbox';

/** One input row, already judged by the producer. */
export type IngestRow =
  | { row: number; input: string; extra: string[]; kind: 'queued'; plate: string; sameVehicleAs?: string }
  | { row: number; input: string; extra: string[]; kind: 'rejected'; plate: string; reason: string; message: string }
  | { row: number; input: string; extra: string[]; kind: 'duplicate'; plate: string; duplicateOf: number };

/** Stored form of a row: a compact array (a million rows is a lot of Redis memory). */
export type StoredRow = [row: number, input: string, kind: 0 | 1 | 2, plate: string, extra: string[], detail?: string | number, detail2?: string];

export function encodeRow(r: IngestRow): string {
  switch (r.kind) {
    case 'queued':
      return JSON.stringify(r.sameVehicleAs ? [r.row, r.input, 0, r.plate, r.extra, r.sameVehicleAs] : [r.row, r.input, 0, r.plate, r.extra]);
    case 'rejected':
      return JSON.stringify([r.row, r.input, 1, r.plate, r.extra, r.reason, r.message]);
    case 'duplicate':
      return JSON.stringify([r.row, r.input, 2, r.plate, r.extra, r.duplicateOf]);
  }
}

export function decodeRow(raw: string): IngestRow {
  const [row, input, kind, plate, extra, detail, detail2] = JSON.parse(raw) as StoredRow;
  if (kind === 1) return { row, input, extra, kind: 'rejected', plate, reason: String(detail), message: detail2 ?? '' };
  if (kind === 2) return { row, input, extra, kind: 'duplicate', plate, duplicateOf: Number(detail) };
  return typeof detail === 'string' ? { row, input, extra, kind: 'queued', plate, sameVehicleAs: detail } : { row, input, extra, kind: 'queued', plate };
}

export interface BatchCounts {
  /** Input rows read. */
  total: number;
  /** Distinct valid plates put on the queue. */
  enqueued: number;
  /** Enqueued, not started or waiting to be created. */
  queued: number;
  /** Created upstream, not finished. */
  inflight: number;
  done: number;
  failed: number;
  /** Invalid plates, never enqueued. */
  rejected: number;
  /** Rows repeating an earlier plate of the batch, enqueued once. */
  duplicates: number;
  possibleDuplicates: number;
  /** Upstream requests spent: queries created, successful polls, 429s received. */
  creates: number;
  polls: number;
  rateLimited: number;
  /** Plates answered from a stored result, free. */
  reused: number;
}

export interface BatchInfo {
  id: string;
  source: BatchSource;
  name: string;
  createdAt: number;
  finishedAt?: number;
  sealed: boolean;
  metadata: Record<string, unknown>;
  extraColumns: string[];
  product: string;
  counts: BatchCounts;
  /** Cap on creates for this batch (unset = none). */
  maxCreates?: number;
  /** Plates with a stored result this recent are answered from it (0 = off). */
  reuseWithinMs: number;
  /** Why the batch's creates are held back, when they are ('budget'). */
  blocked?: string;
}

export interface NewBatch {
  id: string;
  source: BatchSource;
  name: string;
  product: string;
  metadata?: Record<string, unknown>;
  extraColumns?: string[];
  maxCreates?: number;
  reuseWithinMs?: number;
}

const SEAL = `
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
redis.call('HSET', KEYS[1], 'sealed', '1')
local b = redis.call('HMGET', KEYS[1], 'enqueued', 'done', 'failed', 'finishedAt')
if not b[4] and (tonumber(b[2] or '0') + tonumber(b[3] or '0')) >= tonumber(b[1] or '0') then
  redis.call('HSET', KEYS[1], 'finishedAt', ARGV[1])
  return 2
end
return 1
`;

const COUNT_FIELDS = ['total', 'enqueued', 'inflight', 'done', 'failed', 'rejected', 'duplicates', 'possibleDuplicates', 'creates', 'polls', 'rateLimited', 'reused'] as const;

interface BatchCommands {
  vqbSealBatch(batch: string, now: number): Promise<number>;
}

export class BatchStore {
  readonly #redis: Redis & BatchCommands;
  readonly #keys: VqbKeys;
  readonly #queue: PlateQueue;
  readonly #now: () => number;

  constructor(redis: Redis, keys: VqbKeys, queue: PlateQueue, now: () => number = Date.now) {
    redis.defineCommand('vqbSealBatch', { numberOfKeys: 1, lua: SEAL });
    this.#redis = redis as Redis & BatchCommands;
    this.#keys = keys;
    this.#queue = queue;
    this.#now = now;
  }

  /** Creates the batch, or finds the one with this id (same input → same batch, nothing paid twice). */
  async open(batch: NewBatch): Promise<{ created: boolean; info: BatchInfo }> {
    const key = this.#keys.batch(batch.id);
    const createdAt = this.#now();
    const created = (await this.#redis.hsetnx(key, 'createdAt', String(createdAt))) === 1;
    if (created) {
      await this.#redis
        .multi()
        .hset(key, {
          id: batch.id,
          source: batch.source,
          name: batch.name,
          product: batch.product,
          metadata: JSON.stringify(batch.metadata ?? {}),
          extraColumns: JSON.stringify(batch.extraColumns ?? []),
          ingestedRows: '0',
          reuseWithinMs: String(batch.reuseWithinMs ?? 0),
          ...(batch.maxCreates !== undefined ? { maxCreates: String(batch.maxCreates) } : {}),
        })
        .zadd(this.#keys.batches, createdAt, batch.id)
        .exec();
    }
    return { created, info: await this.get(batch.id) };
  }

  /** Rows already ingested: a restarted ingest skips them (their jobs and counts exist). */
  async ingestedRows(batchId: string): Promise<number> {
    return Number((await this.#redis.hget(this.#keys.batch(batchId), 'ingestedRows')) ?? 0);
  }

  /**
   * Stores a chunk of rows and enqueues its new plates. Jobs are added first (their ids make that
   * idempotent); rows and counts follow in one MULTI with the ingest position, so a crash between
   * the two only repeats no-op adds.
   */
  async addRows(batchId: string, product: string, rows: readonly IngestRow[]): Promise<void> {
    if (rows.length === 0) return;
    const queued = rows.filter((r): r is Extract<IngestRow, { kind: 'queued' }> => r.kind === 'queued');
    if (queued.length > 0) {
      await this.#queue.addBulk(
        queued.map((r) => ({
          name: 'plate',
          data: newJobData(batchId, r.plate, product),
          opts: { jobId: jobIdFor(batchId, r.plate) },
        })),
      );
    }
    const key = this.#keys.batch(batchId);
    const multi = this.#redis.multi().rpush(this.#keys.rows(batchId), ...rows.map(encodeRow));
    multi.hincrby(key, 'total', rows.length);
    multi.hincrby(key, 'ingestedRows', rows.length);
    if (queued.length > 0) multi.hincrby(key, 'enqueued', queued.length);
    const rejected = rows.length - queued.length - rows.filter((r) => r.kind === 'duplicate').length;
    if (rejected > 0) multi.hincrby(key, 'rejected', rejected);
    if (rows.length - queued.length - rejected > 0) multi.hincrby(key, 'duplicates', rows.length - queued.length - rejected);
    await multi.exec();
  }

  /** A new create cap for the batch (`null` removes it); the caller un-parks held plates. */
  async setMaxCreates(batchId: string, maxCreates: number | null): Promise<void> {
    await this.get(batchId);
    if (maxCreates === null) await this.#redis.hdel(this.#keys.batch(batchId), 'maxCreates');
    else await this.#redis.hset(this.#keys.batch(batchId), 'maxCreates', String(maxCreates));
  }

  /** Extra input columns can grow while a CSV is read; the final list is stored when ingest ends. */
  async setExtraColumns(batchId: string, columns: readonly string[]): Promise<void> {
    await this.#redis.hset(this.#keys.batch(batchId), 'extraColumns', JSON.stringify(columns));
  }

  /** All rows are in: from now on the last outcome marks the batch finished. True if it already is. */
  async seal(batchId: string): Promise<boolean> {
    const result = await this.#redis.vqbSealBatch(this.#keys.batch(batchId), this.#now());
    if (result === -1) throw new BatchNotFoundError(batchId);
    return result === 2 || (await this.get(batchId)).finishedAt !== undefined;
  }

  async exists(batchId: string): Promise<boolean> {
    return (await this.#redis.exists(this.#keys.batch(batchId))) === 1;
  }

  async get(batchId: string): Promise<BatchInfo> {
    const f = await this.#redis.hgetall(this.#keys.batch(batchId));
    if (!f.createdAt) throw new BatchNotFoundError(batchId);
    const n = (name: string): number => Number(f[name] ?? 0);
    const counts = Object.fromEntries(COUNT_FIELDS.map((name) => [name, n(name)])) as unknown as BatchCounts;
    counts.queued = Math.max(0, counts.enqueued - counts.done - counts.failed - counts.inflight);
    return {
      id: f.id ?? batchId,
      source: (f.source ?? 'library') as BatchSource,
      name: f.name ?? batchId,
      createdAt: n('createdAt'),
      ...(f.finishedAt ? { finishedAt: n('finishedAt') } : {}),
      sealed: f.sealed === '1',
      metadata: JSON.parse(f.metadata ?? '{}') as Record<string, unknown>,
      extraColumns: JSON.parse(f.extraColumns ?? '[]') as string[],
      product: f.product ?? 'agregados',
      counts,
      ...(f.maxCreates !== undefined && f.maxCreates !== '' ? { maxCreates: n('maxCreates') } : {}),
      reuseWithinMs: n('reuseWithinMs'),
      ...(f.blocked ? { blocked: f.blocked } : {}),
    };
  }

  /** Newest first. */
  async list(offset = 0, limit = 20): Promise<{ total: number; batches: BatchInfo[] }> {
    const [total, ids] = await Promise.all([this.#redis.zcard(this.#keys.batches), this.#redis.zrevrange(this.#keys.batches, offset, offset + limit - 1)]);
    const batches = await Promise.all(ids.map((id) => this.get(id)));
    return { total, batches };
  }

  /** The batch's rows in input order, read in chunks (bounded memory for a million rows). */
  async *rows(batchId: string, chunk = 1_000): AsyncIterable<IngestRow> {
    const key = this.#keys.rows(batchId);
    for (let start = 0; ; start += chunk) {
      const raws = await this.#redis.lrange(key, start, start + chunk - 1);
      for (const raw of raws) yield decodeRow(raw);
      if (raws.length < chunk) return;
    }
  }
}

// Turns input rows (from a CSV, an API request or library code) into a batch: each row judged
// (valid, invalid, duplicate), stored for the exports, and each new plate enqueued once. The
// batch id comes from the content, so the same input resumes the same batch instead of paying
// again; a restart mid-ingest skips the rows already stored and adds no job twice.
import { clock } from '../clock.js';
import { BatchArchivedError, InputError, isError, RedisFullError } from '../errors.js';
import type { BatchInfo, IngestRow } from '../queue/batch/store.js';
import type { PriorityClass } from '../queue/types.js';
import { isRedisFull } from '../redis/health.js';
import type { BatchSource } from '../schemas/batch.js';
import type { QueueServices } from '../services.js';
import { PlateDeduper } from './dedup.js';

export { batchIdFor } from './batch-id.js';

import { archiveFor } from '../sinks/export.js';
import { startPlateTraces, tracing } from '../telemetry/index.js';
import type { InputRow } from './types.js';

const CHUNK = 1_000;

export interface IngestOptions {
  id: string;
  /** sha256 of the content (the file's bytes, a list's rows): the same id with other content is BATCH_ID_TAKEN. */
  digest?: string;
  source: BatchSource;
  name: string;
  metadata?: Record<string, unknown>;
  /** Live list of the extra column names (it may grow while a CSV is read). */
  extraColumns?: readonly string[];
  /** Cap on creates for this batch. */
  maxCreates?: number;
  /** Answer plates from results stored this recently (default: VQ_REUSE_WITHIN). */
  reuseWithinMs?: number;
  /** The account whose key and limits the batch uses (default: the first configured). */
  account?: string;
  /** A pooled batch: the pool and its keys besides `account` (which is the batch's home). */
  pool?: { name: string; keys: string[] };
  /** interactive (a person waits; at most VQ_INTERACTIVE_MAX plates), normal (default), bulk. */
  priority?: PriorityClass;
  /** Share of the account's rate relative to the other batches of its class (default 1). */
  weight?: number;
  /** When the batch should be finished, epoch ms (already judged: producers/enqueue.ts). */
  deadline?: number;
  /** Where the batch's webhooks go (http/https, a host on VQ_WEBHOOK_ALLOW); refused before anything is stored. */
  callbackUrl?: string;
  /**
   * Told once, at once, when another ingest of the same batch holds its lock (a live one, or a
   * stopped process's until it expires).
   */
  onLockWait?: (expiresInMs: number) => void;
}

export interface IngestResult {
  batch: BatchInfo;
  /** False when the id named an existing batch, which this call resumed or left as it was. */
  created: boolean;
}

export async function ingest(
  services: QueueServices,
  options: IngestOptions,
  rows: AsyncIterable<InputRow> | Iterable<InputRow>,
): Promise<IngestResult> {
  try {
    return await ingestBatch(services, options, rows);
  } catch (err) {
    // A full Redis is one typed error whatever step it refused: each chunk is all or nothing, so
    // the same ingest run again (same content → same batch id) resumes after the last stored chunk.
    if (isRedisFull(err) && !isError(err, RedisFullError))
      throw new RedisFullError(`ingesting batch ${options.id}`, err);
    throw err;
  }
}

async function ingestBatch(
  services: QueueServices,
  options: IngestOptions,
  rows: AsyncIterable<InputRow> | Iterable<InputRow>,
): Promise<IngestResult> {
  const { batches, config } = services;
  const { account } = services.accounts.for(options.account);
  const weight = options.weight ?? 1;
  if (!Number.isInteger(weight) || weight < 1 || weight > 1_000)
    throw new InputError('BAD_WEIGHT', 'a weight is a whole number from 1 to 1000');
  // The batch is the account's own: another account's batch of the same id is another batch.
  const ref = { id: options.id, account: account.id };
  // The same content after its batch was archived (retention) must not pay again.
  if (!(await batches.exists(ref)) && (await archiveFor(config).manifestFor(ref.id, [ref.account])) !== undefined)
    throw new BatchArchivedError(options.id);
  // An interactive batch over VQ_INTERACTIVE_MAX is refused before anything is stored: refused
  // halfway, it stayed an unsealed batch ("ingesting 0/0") that held its content's id for good.
  if (options.priority === 'interactive') rows = await withinInteractiveMax(rows, config.interactiveMax);
  // Checked by enqueue (producers/enqueue.ts prepare), the one way in, before anything was stored.
  const callbackUrl = options.callbackUrl;
  const { created } = await batches.open({
    id: options.id,
    account: account.id,
    priority: options.priority ?? 'normal',
    weight,
    ...(options.deadline !== undefined ? { deadline: options.deadline } : {}),
    ...(options.pool !== undefined ? { pool: options.pool } : {}),
    source: options.source,
    name: options.name,
    product: account.product,
    ...(options.metadata ? { metadata: options.metadata } : {}),
    ...(options.extraColumns ? { extraColumns: [...options.extraColumns] } : {}),
    reuseWithinMs: options.reuseWithinMs ?? config.budget.reuseWithinMs,
    ...(options.digest !== undefined ? { digest: options.digest } : {}),
    ...(callbackUrl !== undefined ? { callbackUrl } : {}),
  });
  if (created && options.maxCreates !== undefined) await services.budget.setMaxCreates(ref, options.maxCreates);
  // Before any plate is scheduled: the deadline watch (plans/watch.ts) looks at this account from now on.
  if (created && options.deadline !== undefined) await services.scheduler.noteDeadlineAccount(account.id);
  const info = await services.batchViews.get(ref);
  // The same content again, with another callbackUrl: the batch keeps going, and tells the new one.
  if (!created && callbackUrl !== undefined && info.callbackUrl !== callbackUrl) {
    await services.webhooks.retarget(ref, callbackUrl);
    info.callbackUrl = callbackUrl;
  }
  if (info.sealed) return { batch: info, created };
  // Two producers given the same content at once (two API servers, a retried request) must not
  // both store its rows: one ingests, the other waits and then finds the batch sealed.
  const lock = await batches.lockIngest(ref, options.onLockWait);
  try {
    const current = await services.batchViews.get(ref);
    if (current.sealed) return { batch: current, created };
    const batch = await ingestRows(services, options, info, rows, lock.refresh);
    // Every plate already had an outcome when the input ended (all rejected, all reused): the
    // batch finished at its seal, and no worker will see it finish.
    if (batch.finishedAt !== undefined && batch.callbackUrl !== undefined) await services.webhooks.batchFinished(batch);
    // Put the first plates on the queue now: an interactive plate must not wait for a worker's feed timer.
    // Its first plate goes now even when the queue is full (feeder.ts freshPriority): its home
    // account names it.
    for (const key of [batch.account, ...(batch.pool?.keys ?? [])])
      await services.feeder.feedAndWake(key, key === batch.account ? batch.id : undefined);
    return { batch, created };
  } finally {
    await lock.release();
  }
}

async function ingestRows(
  services: QueueServices,
  options: IngestOptions,
  batch: BatchInfo,
  rows: AsyncIterable<InputRow> | Iterable<InputRow>,
  refreshLock: () => Promise<void>,
): Promise<BatchInfo> {
  const { batches, config } = services;
  let queued = batch.counts.enqueued;
  const skip = await batches.ingestedRows(batch);
  const deduper = new PlateDeduper();
  let seen = 0;
  let chunk: IngestRow[] = [];
  for await (const row of rows) {
    // Rows before `skip` were stored by an earlier run: only the deduper needs to see them again.
    const judged = judge(deduper, row, options.extraColumns ?? []);
    if (seen++ < skip) continue;
    // Counted before the batch was opened (withinInteractiveMax); kept for a batch opened interactive earlier.
    if (judged.kind === 'queued' && ++queued > config.interactiveMax && batch.priority === 'interactive')
      throw tooManyForInteractive(config.interactiveMax);
    chunk.push(judged);
    if (chunk.length >= CHUNK) {
      await addTraced(services, batch, chunk);
      await refreshLock();
      chunk = [];
    }
  }
  await addTraced(services, batch, chunk);
  if (options.extraColumns) await batches.setExtraColumns(batch, [...options.extraColumns]);
  await batches.seal(batch);
  return services.batchViews.get(batch);
}

/**
 * Stores a chunk of rows and schedules its plates; tracing on, each queued plate starts a trace of
 * its own here (linked to the batch's span), its context kept beside it for its wait.
 */
async function addTraced(services: QueueServices, batch: BatchInfo, chunk: IngestRow[]): Promise<void> {
  const traces = services.feeder.traces;
  if (traces === undefined || !tracing()) return services.batches.addRows(batch, chunk, services.scheduler);
  const plates = chunk.flatMap((row) => (row.kind === 'queued' ? [row.plate] : []));
  const attributes = { 'vqb.account.id': batch.account, 'vqb.batch.id': batch.id, 'vqb.door': batch.source };
  const roots = startPlateTraces(plates, attributes, services.config.tracePlates);
  try {
    // Kept before the plates are listed: a feed may pick them the moment they are.
    await traces.keep(batch, roots.carried, clock.now());
    await services.batches.addRows(batch, chunk, services.scheduler);
  } finally {
    roots.end();
  }
}

/** TOO_MANY_FOR_INTERACTIVE, in the words every door uses (`plates`: how many the input holds, when counted). */
export function tooManyForInteractive(max: number, plates?: number): InputError {
  return new InputError(
    'TOO_MANY_FOR_INTERACTIVE',
    `an interactive batch holds at most ${max} plates (VQ_INTERACTIVE_MAX)` +
      `${plates !== undefined ? `; this one has ${plates}` : ''}: send it as normal or bulk (nothing was stored)`,
  );
}

/**
 * The rows of an interactive batch, read into memory while their distinct valid plates are
 * counted: more than `max` refuses the batch before it exists. Only the rows up to the refusal
 * are held (an interactive batch is small by definition).
 */
async function withinInteractiveMax(
  rows: AsyncIterable<InputRow> | Iterable<InputRow>,
  max: number,
): Promise<InputRow[]> {
  const deduper = new PlateDeduper();
  const held: InputRow[] = [];
  let over = false;
  // One pass (a reader's rows can be iterated once): past `max`, the rest is only counted.
  for await (const row of rows) {
    deduper.check(row);
    if (deduper.size > max) over = true;
    if (!over) held.push(row);
  }
  if (over) throw tooManyForInteractive(max, deduper.size);
  return held;
}

function judge(deduper: PlateDeduper, row: InputRow, extraColumns: readonly string[]): IngestRow {
  const extra = extraColumns.map((name) => row.extra[name] ?? '');
  const result = deduper.check(row);
  switch (result.kind) {
    case 'new':
      return {
        row: row.row,
        input: row.input,
        extra,
        kind: 'queued',
        plate: result.plate,
        ...(result.sameVehicleAs ? { sameVehicleAs: result.sameVehicleAs } : {}),
      };
    case 'duplicate':
      return {
        row: row.row,
        input: row.input,
        extra,
        kind: 'duplicate',
        plate: result.plate,
        duplicateOf: result.firstRow,
      };
    case 'rejected':
      return {
        row: row.row,
        input: row.input,
        extra,
        kind: 'rejected',
        plate: result.normalized,
        reason: result.reason,
        message: result.message,
      };
  }
}

/** Plates handed over in code or JSON: one row each, numbered from 1, no extra columns. */
export function rowsFromPlates(plates: readonly string[]): InputRow[] {
  return plates.map((input, i) => ({ row: i + 1, input, extra: {} }));
}

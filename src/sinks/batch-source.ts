// A batch as rows for a sink: every stored input row, in input order, joined with the outcome of
// its plate. Read from Redis in chunks, so a million-row export runs in bounded memory and can be
// rebuilt at any time, byte for byte, from what is stored.

import type { OutcomeStore } from '../queue/batch/outcomes.js';
import type { BatchKey, BatchStore, IngestRow } from '../queue/batch/store.js';
import { wasCancelled } from '../queue/rerun.js';
import type { Outcome } from '../queue/types.js';
import type { UpstreamResult } from '../schemas/result-row.js';
import type { ExportRow, ExportSource, RejectRow } from './types.js';

const CHUNK = 1_000;

export function toExportRow(row: IngestRow, extraColumns: readonly string[], outcome: Outcome | undefined): ExportRow {
  // A null-prototype object: an input column named `__proto__` (or `constructor`) is a column like any other.
  const extra = Object.create(null) as Record<string, string>;
  extraColumns.forEach((name, i) => {
    extra[name] = row.extra[i] ?? '';
  });
  const base = { row: row.row, input: row.input, plate: row.plate, extra };
  if (row.kind === 'rejected') {
    return { ...base, status: 'rejected', error: { code: row.reason, message: row.message } };
  }
  const fromOutcome: Partial<ExportRow> = outcome
    ? {
        ...(outcome.queryId ? { queryId: outcome.queryId } : {}),
        ...(outcome.status === 'done' && isBody(outcome.result) ? { result: outcome.result } : {}),
        ...(outcome.error ? { error: { code: outcome.error.code, message: outcome.error.message } } : {}),
        ...(outcome.possibleDuplicate ? { possibleDuplicate: true } : {}),
        ...(outcome.reused ? { reused: true } : {}),
        ...(outcome.enqueuedAt ? { enqueuedAt: outcome.enqueuedAt } : {}),
        ...(outcome.createdAt ? { createdAt: outcome.createdAt } : {}),
        finishedAt: outcome.finishedAt,
      }
    : {};
  if (row.kind === 'duplicate') {
    // The plate was queried once, for its first row; this row carries the same answer.
    return { ...base, ...fromOutcome, status: 'duplicate', duplicateOf: row.duplicateOf };
  }
  return {
    ...base,
    ...fromOutcome,
    status: outcome ? (wasCancelled(outcome) ? 'cancelled' : outcome.status) : 'pending',
    ...(outcome ? { requests: outcome.requests } : {}),
    ...(outcome?.key !== undefined ? { key: outcome.key } : {}),
    ...(row.sameVehicleAs ? { sameVehicleAs: row.sameVehicleAs } : {}),
  };
}

/**
 * A done plate's stored result is the upstream's body of the finished query: an object, with the
 * status that finished it (upstream/response.ts keeps nothing else as a result).
 */
function isBody(result: unknown): result is UpstreamResult {
  return typeof result === 'object' && result !== null && !Array.isArray(result);
}

export async function batchExportSource(
  batches: BatchStore,
  outcomes: OutcomeStore,
  batch: BatchKey,
): Promise<ExportSource> {
  const info = await batches.read(batch);
  const batchId = info.id;
  return {
    batchId,
    ...(info.fileName !== undefined ? { fileName: info.fileName } : {}),
    extraColumns: info.extraColumns,
    async *rows(): AsyncIterable<ExportRow> {
      let chunk: IngestRow[] = [];
      const flush = async function* (): AsyncIterable<ExportRow> {
        const found = await outcomes.getMany(
          info,
          chunk.map((r) => r.plate),
        );
        for (let i = 0; i < chunk.length; i++) {
          const row = chunk[i]!;
          yield toExportRow(row, info.extraColumns, row.kind === 'rejected' ? undefined : found[i]);
        }
        chunk = [];
      };
      for await (const row of batches.rows(info, CHUNK)) {
        chunk.push(row);
        if (chunk.length >= CHUNK) yield* flush();
      }
      if (chunk.length > 0) yield* flush();
    },
    async *rejects(): AsyncIterable<RejectRow> {
      for await (const row of batches.rows(info, CHUNK)) {
        if (row.kind === 'rejected') yield { row: row.row, input: row.input, reason: row.reason, message: row.message };
      }
    },
  };
}

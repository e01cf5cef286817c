// The seam between stored outcomes and wherever users read them. The worker never calls a sink:
// batches are exported from Redis (on finish, or on demand), so a new sink (webhook, object
// storage) is a new implementation of ExportSink and nothing else.
import type { ExportFormat, RowStatus, UpstreamResult } from '../schemas/result-row.js';

export type { RowStatus, UpstreamResult };

/** One input row joined with its outcome. Exports hold exactly one of these per input row. */
export interface ExportRow {
  /** 1-based number of the data row in the input (header not counted). */
  row: number;
  /** The plate exactly as given. */
  input: string;
  /** Normalised plate; '' when nothing was left of the input. */
  plate: string;
  status: RowStatus;
  queryId?: string;
  /** The upstream's body for a finished query (duplicate rows carry the first row's result). */
  result?: UpstreamResult;
  error?: { code: string; message: string };
  /** For duplicate rows: the row that was enqueued. */
  duplicateOf?: number;
  /** Another plate of the batch that is the same vehicle in the other format (old ↔ Mercosul). */
  sameVehicleAs?: string;
  /** The upstream may have charged twice for this plate (a create re-sent after a crash). */
  possibleDuplicate?: boolean;
  /** Answered from a result stored within the batch's reuse window: no upstream request, no charge. */
  reused?: boolean;
  enqueuedAt?: number;
  createdAt?: number;
  finishedAt?: number;
  /** Upstream requests spent on this plate. */
  requests?: number;
  /** The account (its name, never its secret) whose key made the plate's requests: one of a pool's keys. */
  key?: string;
  /** Every other input column, carried through so users can join results back to their records. */
  extra: Record<string, string>;
}

export interface RejectRow {
  row: number;
  input: string;
  reason: string;
  message: string;
}

export interface ExportSource {
  batchId: string;
  /** The name its files go by, when not its id (`<id>.<account>`: an id another account held first). */
  fileName?: string;
  /** Names of the extra input columns, in input order. */
  extraColumns: string[];
  /** Called once per pass; a sink may pass over the rows more than once (e.g. to learn CSV columns). */
  rows(): AsyncIterable<ExportRow>;
  rejects(): AsyncIterable<RejectRow>;
}

export interface ExportResult {
  /** Absolute paths written, by kind. */
  files: { csv?: string; jsonl?: string; rejects?: string; xlsx?: string };
  rows: number;
}

export interface ExportSink {
  write(source: ExportSource, formats: readonly ExportFormat[]): Promise<ExportResult>;
}

export type { ExportFormat };

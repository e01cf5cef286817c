// Plates handed over as a list (library code, JSON over HTTP): plain strings, or rows with a
// `plate` field and any other fields, which are carried through to the exports like CSV columns.
import { InputError } from '../errors.js';
import type { BatchSource } from '../queue/batch/store.js';
import type { QueueServices } from '../queue/services.js';
import type { PriorityClass } from '../queue/types.js';
import { batchIdFor, digestOf, ingest, type IngestResult } from './ingest.js';
import type { InputRow } from './types.js';

export type PlateRow = { plate: string } & Record<string, string | number | boolean | null | undefined>;
export type PlateInput = string | PlateRow;

export interface ListOptions {
  source: BatchSource;
  /** Shown in status and used in the derived batch id; default: the source. */
  name?: string;
  metadata?: Record<string, unknown>;
  /** Use this id instead of one derived from the content (letters, digits, _ and -). */
  batchId?: string;
  /** A new batch even if the same plates were sent before (pays again). */
  force?: boolean;
  maxCreates?: number;
  reuseWithinMs?: number;
  account?: string;
  priority?: PriorityClass;
  weight?: number;
}

const BATCH_ID = /^[A-Za-z0-9_-]{1,100}$/;

export function toInputRows(items: readonly PlateInput[]): { rows: InputRow[]; extraColumns: string[] } {
  const columns = new Set<string>();
  const rows = items.map((item, i): InputRow => {
    if (typeof item === 'string') return { row: i + 1, input: item, extra: {} };
    const extra: Record<string, string> = {};
    for (const [key, value] of Object.entries(item)) {
      if (key === 'plate' || value === undefined || value === null) continue;
      columns.add(key);
      extra[key] = String(value);
    }
    return { row: i + 1, input: typeof item.plate === 'string' ? item.plate : String(item.plate ?? ''), extra };
  });
  return { rows, extraColumns: [...columns] };
}

/**
 * The batch id of a list of plates: `batchId` when given, else derived from the name and the rows
 * (the same plates under the same name are the same batch; `force` makes a new one). The library's
 * estimate and the HTTP API's dry run use it too, so they name the batch ingestList would.
 */
export function listBatchId(rows: readonly InputRow[], options: { batchId?: string | undefined; name: string; force?: boolean | undefined }): string {
  return options.batchId ?? batchIdFor(options.name, digestOf([JSON.stringify(rows)]), options.force === true);
}

export async function ingestList(services: QueueServices, items: readonly PlateInput[], options: ListOptions): Promise<IngestResult> {
  if (options.batchId !== undefined && !BATCH_ID.test(options.batchId)) {
    throw new InputError('BAD_BATCH_ID', 'a batch id is 1–100 letters, digits, _ or -');
  }
  const { rows, extraColumns } = toInputRows(items);
  const name = options.name ?? options.source;
  const id = listBatchId(rows, { batchId: options.batchId, name, force: options.force });
  return ingest(
    services,
    {
      id,
      source: options.source,
      name,
      extraColumns,
      ...(options.metadata ? { metadata: options.metadata } : {}),
      ...(options.maxCreates !== undefined ? { maxCreates: options.maxCreates } : {}),
      ...(options.reuseWithinMs !== undefined ? { reuseWithinMs: options.reuseWithinMs } : {}),
      ...(options.account !== undefined ? { account: options.account } : {}),
      ...(options.priority !== undefined ? { priority: options.priority } : {}),
      ...(options.weight !== undefined ? { weight: options.weight } : {}),
    },
    rows,
  );
}

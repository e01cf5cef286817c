// Plates handed over as a list (library code, JSON over HTTP): plain strings, or rows with a
// `plate` field and any other fields, which are carried through to the exports like CSV columns.
import { InputError } from '../errors.js';
import { BATCH_ID_RULE, isBatchId, type BatchSource } from '../queue/batch/store.js';
import type { QueueServices } from '../services.js';
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
  callbackUrl?: string;
}

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
  return options.batchId ?? batchIdFor(options.name, listDigest(rows), options.force === true);
}

/** The digest of a list's content: its rows, plates and carried fields, in order. */
export function listDigest(rows: readonly InputRow[]): string {
  return digestOf([JSON.stringify(rows)]);
}

export async function ingestList(services: QueueServices, items: readonly PlateInput[], options: ListOptions): Promise<IngestResult> {
  if (options.batchId !== undefined && !isBatchId(options.batchId)) throw new InputError('BAD_BATCH_ID', BATCH_ID_RULE);
  const { rows, extraColumns } = toInputRows(items);
  const name = options.name ?? options.source;
  const id = listBatchId(rows, { batchId: options.batchId, name, force: options.force });
  return ingest(
    services,
    {
      id,
      // A named batchId given other plates than its batch holds is refused (BATCH_ID_TAKEN).
      digest: listDigest(rows),
      source: options.source,
      name,
      extraColumns,
      ...(options.metadata ? { metadata: options.metadata } : {}),
      ...(options.maxCreates !== undefined ? { maxCreates: options.maxCreates } : {}),
      ...(options.reuseWithinMs !== undefined ? { reuseWithinMs: options.reuseWithinMs } : {}),
      ...(options.account !== undefined ? { account: options.account } : {}),
      ...(options.priority !== undefined ? { priority: options.priority } : {}),
      ...(options.weight !== undefined ? { weight: options.weight } : {}),
      ...(options.callbackUrl !== undefined ? { callbackUrl: options.callbackUrl } : {}),
    },
    rows,
  );
}

// One JSON object per input row, keys in a fixed order, so the same stored outcomes always give
// the same bytes (the export carries no timestamp of its own).

import type { ResultRow } from '../schemas/result-row.js';
import type { ExportRow } from './types.js';

/** Epoch ms → ISO 8601; anything that is not a finite number is left out. */
export function isoTime(ms: number | undefined): string | undefined {
  return ms !== undefined && Number.isFinite(ms) ? new Date(ms).toISOString() : undefined;
}

/**
 * The extra input columns in `extraColumns` order, then any others the row has. A null-prototype
 * object, so a column named `__proto__` stays a column.
 */
export function orderedExtra(extra: Record<string, string>, extraColumns: readonly string[]): Record<string, string> {
  const out = Object.create(null) as Record<string, string>;
  for (const name of extraColumns) {
    if (Object.hasOwn(extra, name)) out[name] = extra[name] as string;
  }
  for (const [name, value] of Object.entries(extra)) {
    if (!Object.hasOwn(out, name)) out[name] = value;
  }
  return out;
}

/**
 * Key order: row, input, plate, status, queryId, possibleDuplicate, duplicateOf, sameVehicleAs, reused,
 * error {code, message}, result, enqueuedAt, createdAt, finishedAt (ISO strings), requests,
 * key, input_columns. Absent values are left out. Ends with '\n'.
 */
export function jsonlLine(row: ExportRow, extraColumns: readonly string[]): string {
  // Typed as the published row (ResultRow in /openapi.json): a field added here must be added there.
  const out: ResultRow = {
    row: row.row,
    input: row.input,
    plate: row.plate,
    status: row.status,
    queryId: row.queryId,
    possibleDuplicate: row.possibleDuplicate,
    duplicateOf: row.duplicateOf,
    sameVehicleAs: row.sameVehicleAs,
    reused: row.reused,
    error: row.error === undefined ? undefined : { code: row.error.code, message: row.error.message },
    result: row.result,
    enqueuedAt: isoTime(row.enqueuedAt),
    createdAt: isoTime(row.createdAt),
    finishedAt: isoTime(row.finishedAt),
    requests: row.requests,
    key: row.key,
    input_columns: orderedExtra(row.extra, extraColumns),
  };
  return `${JSON.stringify(out)}\n`;
}

/** Lines joined into chunks of about `chunkBytes`, so the file is written in few large writes. */
export async function* jsonlChunks(
  rows: AsyncIterable<ExportRow>,
  extraColumns: readonly string[],
  onRow: (row: ExportRow) => void = () => {},
  chunkBytes = 64 * 1024,
): AsyncGenerator<string> {
  let pending = '';
  for await (const row of rows) {
    onRow(row);
    pending += jsonlLine(row, extraColumns);
    if (pending.length >= chunkBytes) {
      yield pending;
      pending = '';
    }
  }
  if (pending !== '') yield pending;
}

import { digestOf } from './batch-id.js';
import type { InputRow } from './types.js';

export type PlateRow = { plate: string } & Record<string, string | number | boolean | null | undefined>;
export type PlateInput = string | PlateRow;

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

/** The digest of a list's content: its rows, plates and carried fields, in order. */
export function listDigest(rows: readonly InputRow[]): string {
  return digestOf([JSON.stringify(rows)]);
}

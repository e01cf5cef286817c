// How a batch's input rows are stored: a compact JSON array each (a million rows is a lot of
// Redis memory), in input order, for the exports.

/** One input row, already judged by the producer. */
export type IngestRow =
  | { row: number; input: string; extra: string[]; kind: 'queued'; plate: string; sameVehicleAs?: string }
  | { row: number; input: string; extra: string[]; kind: 'rejected'; plate: string; reason: string; message: string }
  | { row: number; input: string; extra: string[]; kind: 'duplicate'; plate: string; duplicateOf: number };

/** Stored form of a row: a compact array (a million rows is a lot of Redis memory). */
export type StoredRow = [
  row: number,
  input: string,
  kind: 0 | 1 | 2,
  plate: string,
  extra: string[],
  detail?: string | number,
  detail2?: string,
];

export function encodeRow(r: IngestRow): string {
  switch (r.kind) {
    case 'queued':
      return JSON.stringify(
        r.sameVehicleAs
          ? [r.row, r.input, 0, r.plate, r.extra, r.sameVehicleAs]
          : [r.row, r.input, 0, r.plate, r.extra],
      );
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
  return typeof detail === 'string'
    ? { row, input, extra, kind: 'queued', plate, sameVehicleAs: detail }
    : { row, input, extra, kind: 'queued', plate };
}

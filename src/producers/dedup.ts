// Classify input rows one at a time: a plate to query, a value that is not a plate, or a plate
// already seen in this batch (query once, report on every row). Also notes when a plate is the
// same vehicle as an earlier plate in the other format (ABC1234 ↔ ABC1C34): both are still
// queried, since the user asked for both, but the export says so.

import { checkPlate, type PlateFormat, type PlateRejectReason, vehicleKey } from '../plates.js';
import { PlateMap, plateCode } from './plate-map.js';

export type DedupResult =
  | { kind: 'new'; plate: string; format: PlateFormat; sameVehicleAs?: string }
  | { kind: 'rejected'; reason: PlateRejectReason; message: string; normalized: string }
  | { kind: 'duplicate'; plate: string; firstRow: number };

const OLD = /^[A-Z]{3}[0-9]{4}$/;
const MERCOSUL_FROM_OLD = /^[A-Z]{3}[0-9][A-J][0-9]{2}$/;

/**
 * Memory: 16 bytes or less per distinct plate (a PlateMap of 32-bit plate codes → first row),
 * so a million distinct plates cost about 16 MB and no garbage. The same-vehicle check needs no
 * second table: toMercosul is one-to-one, so the only possible earlier twin of a plate is
 * computed, not stored.
 */
export class PlateDeduper {
  private readonly firstRows = new PlateMap();

  /** Distinct valid plates seen so far. */
  get size(): number {
    return this.firstRows.size;
  }

  check(row: { row: number; input: string }): DedupResult {
    const checked = checkPlate(row.input);
    if (!checked.ok) {
      return { kind: 'rejected', reason: checked.reason, message: checked.message, normalized: checked.normalized };
    }
    const { plate, format } = checked;
    const code = plateCode(plate);
    const firstRow = this.firstRows.get(code);
    if (firstRow !== undefined) return { kind: 'duplicate', plate, firstRow };
    this.firstRows.add(code, row.row);
    const twin = otherFormat(plate);
    if (twin !== undefined && this.firstRows.has(plateCode(twin)))
      return { kind: 'new', plate, format, sameVehicleAs: twin };
    return { kind: 'new', plate, format };
  }
}

/** The plate in the other format that is the same vehicle, if one can exist. */
function otherFormat(plate: string): string | undefined {
  if (OLD.test(plate)) return vehicleKey(plate);
  if (MERCOSUL_FROM_OLD.test(plate)) {
    return plate.slice(0, 4) + String(plate.charCodeAt(4) - 65) + plate.slice(5);
  }
  return undefined;
}

// Which column holds the plates, and whether the first row is a header. Pure functions over the
// first one or two non-blank records, so the rules can be read (and tested) without a stream.

import { InputError } from '../errors.js';
import { checkPlate, foldAccents } from '../plates.js';

/** Lower-case, no accents, letters and digits only: "PLACA DO VEÍCULO" → "placadoveiculo". */
export function headerKey(name: string): string {
  return foldAccents(name)
    .toLowerCase()
    .replace(/[^a-z0-9]/g, '');
}

/** Header names (as headerKey) that certainly mean "the plate". */
const PLATE_HEADERS = new Set([
  'placa',
  'placas',
  'plate',
  'plates',
  'licenseplate',
  'licenseplates',
  'licenceplate',
  'licenceplates',
  'placadoveiculo',
  'placaveiculo',
  'placadoveiculos',
  'placaveicular',
  'placadocarro',
  'placacarro',
  'placadoautomovel',
  'nodaplaca',
  'vehicleplate',
  'vehicleplates',
  'numerodaplaca',
  'numeroplaca',
  'noplaca',
  'nplaca',
  'platenumber',
  'licenseplatenumber',
  'numberplate',
  'registrationplate',
  'placamercosul',
]);

/** Words that mark a plate column inside a longer header ("Placa (Mercosul)", "plate of car"). */
const PLATE_WORDS = new Set(['placa', 'placas', 'plate', 'plates']);

/** Index of the first cell that names the plate column, or -1. Exact names win over names containing a plate word. */
export function findPlateHeader(cells: readonly string[]): number {
  const exact = cells.findIndex((c) => PLATE_HEADERS.has(headerKey(c)));
  if (exact !== -1) return exact;
  return cells.findIndex((c) =>
    foldAccents(c)
      .toLowerCase()
      .split(/[^a-z0-9]+/)
      .some((word) => PLATE_WORDS.has(word)),
  );
}

/** Header names made usable as object keys: trimmed, `colN` when empty, `name_N` when repeated (N = 1-based column). */
export function uniqueNames(cells: readonly string[]): string[] {
  const seen = new Set<string>();
  return cells.map((cell, i) => {
    let name = cell.trim();
    if (name === '') name = `col${i + 1}`;
    if (seen.has(name)) name = `${name}_${i + 1}`;
    while (seen.has(name)) name = `${name}_`;
    seen.add(name);
    return name;
  });
}

export interface HeaderDecision {
  hasHeader: boolean;
  /** 0-based index of the plate column. */
  plateIndex: number;
  /**
   * How the plate column was chosen: named by the caller (`column`), by a plate header name, or by
   * the content of the first records. A column chosen by content must then prove to hold mostly
   * plates (mostlyPlates), or the file is refused: a list of names is not a list of plates.
   */
  foundBy: 'column' | 'header' | 'content';
}

/** A column chosen by its content holds plates when at least half of its rows are valid plates. */
export function mostlyPlates(plates: number, rows: number): boolean {
  return rows > 0 && plates * 2 >= rows;
}

const isPlate = (cell: string | undefined): boolean => cell !== undefined && checkPlate(cell).ok;

/**
 * Decide from the first two non-blank records (`second` may be missing):
 * 1. `column` as a name: the first record is the header and must contain it (exactly, else
 *    case/accent-insensitively), or CSV_NO_PLATE_COLUMN.
 * 2. `column` as a 1-based index: that column; the first record is a header when its cell there
 *    is not a plate and either some cell is a known plate header or no cell holds a digit.
 * 3. A valid plate anywhere in the first record: no header; the plate column is where it is.
 * 4. A known plate header name: header, that column.
 * 5. Otherwise the first record is a header when none of its cells holds a digit (plates always
 *    do, header words rarely), and the plate column is where the second record has a valid plate
 *    (else the first column). A first record with digits is data, plate column first.
 * Rules 3 and 5 choose by content (`foundBy: 'content'`): the reader then checks the whole column.
 */
export function decideHeader(
  first: readonly string[],
  second: readonly string[] | undefined,
  column?: string | number,
): HeaderDecision {
  const noDigits = (cells: readonly string[]) =>
    cells.some((c) => c.trim() !== '') && !cells.some((c) => /[0-9]/.test(c));
  if (typeof column === 'string') {
    const wanted = column.trim();
    let index = first.findIndex((c) => c.trim() === wanted);
    if (index === -1) index = first.findIndex((c) => headerKey(c) === headerKey(wanted) && headerKey(wanted) !== '');
    if (index === -1) {
      const shown = first.slice(0, 20).map((c) => JSON.stringify(c.length > 40 ? `${c.slice(0, 40)}…` : c));
      throw new InputError(
        'CSV_NO_PLATE_COLUMN',
        `no column named ${JSON.stringify(column)}; the first row has ${shown.join(', ')}`,
      );
    }
    return { hasHeader: true, plateIndex: index, foundBy: 'column' };
  }
  if (typeof column === 'number') {
    if (!Number.isInteger(column) || column < 1) {
      throw new InputError('CSV_NO_PLATE_COLUMN', `column index must be a whole number from 1, got ${column}`);
    }
    const index = column - 1;
    if (index >= first.length) {
      throw new InputError(
        'CSV_NO_PLATE_COLUMN',
        `column ${column} asked for, but the first row has ${first.length} column(s)`,
      );
    }
    const hasHeader = !isPlate(first[index]) && (findPlateHeader(first) !== -1 || noDigits(first));
    return { hasHeader, plateIndex: index, foundBy: 'column' };
  }
  const plateAt = first.findIndex((c) => isPlate(c));
  if (plateAt !== -1) return { hasHeader: false, plateIndex: plateAt, foundBy: 'content' };
  const named = findPlateHeader(first);
  if (named !== -1) return { hasHeader: true, plateIndex: named, foundBy: 'header' };
  if (noDigits(first)) {
    const inSecond = second === undefined ? -1 : second.findIndex((c) => isPlate(c));
    return { hasHeader: true, plateIndex: Math.max(inSecond, 0), foundBy: 'content' };
  }
  return { hasHeader: false, plateIndex: 0, foundBy: 'content' };
}

// Brazilian licence plates: normalise what users typed, say why a value is not a plate, and map
// the old format to Mercosul (both may name the same vehicle). Pure functions only.

export type PlateFormat = 'old' | 'mercosul';
export type PlateRejectReason = 'EMPTY' | 'BAD_LENGTH' | 'BAD_FORMAT';

export type PlateCheck =
  | { ok: true; original: string; plate: string; format: PlateFormat }
  | { ok: false; original: string; normalized: string; reason: PlateRejectReason; message: string };

const OLD = /^[A-Z]{3}[0-9]{4}$/;
const MERCOSUL = /^[A-Z]{3}[0-9][A-Z][0-9]{2}$/;

/** NFKD, then drop combining marks: full-width ＡＢＣ becomes ABC, "Veículo" becomes "Veiculo". */
export function foldAccents(value: string): string {
  return value.normalize('NFKD').replace(/[\u0300-\u036f]/g, '');
}

/**
 * Upper-case and keep only A–Z and 0–9. Accents are folded first, so full-width letters and
 * accented look-alikes (Á) become ASCII instead of silently vanishing.
 */
export function normalizePlate(value: string): string {
  return foldAccents(value)
    .toUpperCase()
    .replace(/[^A-Z0-9]/g, '');
}

export function checkPlate(original: string): PlateCheck {
  const plate = normalizePlate(original);
  if (plate.length === 0) {
    return { ok: false, original, normalized: plate, reason: 'EMPTY', message: 'no letters or digits' };
  }
  if (plate.length !== 7) {
    return {
      ok: false,
      original,
      normalized: plate,
      reason: 'BAD_LENGTH',
      message: `plates have 7 characters, this has ${plate.length}`,
    };
  }
  if (OLD.test(plate)) return { ok: true, original, plate, format: 'old' };
  if (MERCOSUL.test(plate)) return { ok: true, original, plate, format: 'mercosul' };
  return { ok: false, original, normalized: plate, reason: 'BAD_FORMAT', message: 'expected ABC1234 or ABC1D23' };
}

/** ABC1234 → ABC1C34: the 5th character, a digit, becomes the letter at that index (0→A … 9→J). */
export function toMercosul(plate: string): string {
  if (MERCOSUL.test(plate)) return plate;
  if (!OLD.test(plate)) throw new RangeError(`not a plate in the old format: ${plate}`);
  return plate.slice(0, 4) + String.fromCharCode(65 + Number(plate[4])) + plate.slice(5);
}

/** The Mercosul form of any valid plate: two plates with the same key may be the same vehicle. */
export function vehicleKey(plate: string): string {
  return OLD.test(plate) ? toMercosul(plate) : plate;
}

// A map from valid plates to a number (the row each was first seen on), for deduplicating
// a million rows in a few MB and without garbage: every valid plate packs into 32 bits
// (3 letters × a digit × a digit-or-letter × 2 digits = 632,736,000 codes), kept in an
// open-addressing table of two typed arrays. A Map of strings needed ~80 bytes per plate and left
// the collector enough work to double the ingest's peak memory.

/** The plate's 32-bit code; the caller passes only plates that checkPlate accepted. */
export function plateCode(plate: string): number {
  const letter = (i: number) => plate.charCodeAt(i) - 65;
  const digit = (i: number) => plate.charCodeAt(i) - 48;
  const fifth = plate.charCodeAt(4);
  const c4 = fifth <= 57 ? fifth - 48 : fifth - 65 + 10;
  return (((letter(0) * 676 + letter(1) * 26 + letter(2)) * 10 + digit(3)) * 36 + c4) * 100 + digit(5) * 10 + digit(6);
}

export class PlateMap {
  #keys: Uint32Array;
  #values: Uint32Array;
  #bits: number;
  #size = 0;

  constructor(initialBits = 12) {
    this.#bits = initialBits;
    this.#keys = new Uint32Array(1 << initialBits);
    this.#values = new Uint32Array(1 << initialBits);
  }

  get size(): number {
    return this.#size;
  }

  /** The value stored for the plate code, or undefined. */
  get(code: number): number | undefined {
    const slot = this.#find(code);
    return this.#keys[slot] === 0 ? undefined : this.#values[slot];
  }

  has(code: number): boolean {
    return this.#keys[this.#find(code)] !== 0;
  }

  /** Stores the value unless the code is present; true when it was added. */
  add(code: number, value: number): boolean {
    let slot = this.#find(code);
    if (this.#keys[slot] !== 0) return false;
    if ((this.#size + 1) * 2 > this.#keys.length) {
      this.#grow();
      slot = this.#find(code);
    }
    // Keys are stored as code + 1 so that 0 means an empty slot.
    this.#keys[slot] = code + 1;
    this.#values[slot] = value;
    this.#size++;
    return true;
  }

  #find(code: number): number {
    const mask = this.#keys.length - 1;
    let slot = Math.imul(code + 1, 0x9e3779b1) >>> (32 - this.#bits);
    for (;;) {
      const key = this.#keys[slot]!;
      if (key === 0 || key === code + 1) return slot;
      slot = (slot + 1) & mask;
    }
  }

  #grow(): void {
    const keys = this.#keys;
    const values = this.#values;
    this.#bits++;
    this.#keys = new Uint32Array(1 << this.#bits);
    this.#values = new Uint32Array(1 << this.#bits);
    for (let i = 0; i < keys.length; i++) {
      const key = keys[i]!;
      if (key === 0) continue;
      const slot = this.#find(key - 1);
      this.#keys[slot] = key;
      this.#values[slot] = values[i]!;
    }
  }
}

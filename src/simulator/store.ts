// Every query the simulator ever created, kept compactly enough for millions: parallel typed
// arrays indexed by a number that the queryId encodes (`q<base36 index>-<checksum>`), the plate
// packed into 32 bits, no objects, closures or timers per query. The status is computed from the
// clock when asked (see lifecycle.ts), so nothing runs in the background.

const INITIAL_CAPACITY = 1024;
const CHECKSUM_SPACE = 36 ** 4;
const ID_PATTERN = /^q([0-9a-z]{1,10})-([0-9a-z]{4})$/;

export interface StoredQuery {
  index: number;
  plate: string;
  createdAtMs: number;
  /** Delay from creation to the terminal state (0 = terminal at creation). */
  delayMs: number;
  failed: boolean;
}

export class QueryStore {
  #size = 0;
  #createdAt = new Float64Array(INITIAL_CAPACITY);
  #delay = new Uint32Array(INITIAL_CAPACITY);
  #plate = new Uint32Array(INITIAL_CAPACITY);
  #failed = new Uint8Array(INITIAL_CAPACITY);
  readonly #salt: number;

  /** `salt` makes ids from another simulator instance fail the checksum instead of naming a wrong query. */
  constructor(salt = 0) {
    this.#salt = salt >>> 0;
  }

  get size(): number {
    return this.#size;
  }

  /** Stores a query and returns its index; `plate` must be a valid normalised plate. */
  add(plate: string, createdAtMs: number, delayMs: number, failed: boolean): number {
    if (this.#size === this.#createdAt.length) this.#grow();
    const index = this.#size;
    this.#createdAt[index] = createdAtMs;
    this.#delay[index] = Math.max(0, Math.min(0xffffffff, Math.round(delayMs)));
    this.#plate[index] = packPlate(plate);
    this.#failed[index] = failed ? 1 : 0;
    this.#size += 1;
    return index;
  }

  get(index: number): StoredQuery | undefined {
    if (!Number.isInteger(index) || index < 0 || index >= this.#size) return undefined;
    return {
      index,
      plate: unpackPlate(this.#plate[index]!),
      createdAtMs: this.#createdAt[index]!,
      delayMs: this.#delay[index]!,
      failed: this.#failed[index] === 1,
    };
  }

  idOf(index: number): string {
    return `q${index.toString(36)}-${this.#checksum(index)}`;
  }

  /** The index a queryId names, or undefined for anything this store did not issue. */
  indexOf(queryId: string): number | undefined {
    const match = ID_PATTERN.exec(queryId);
    if (!match) return undefined;
    const index = parseInt(match[1]!, 36);
    if (index >= this.#size || match[2] !== this.#checksum(index)) return undefined;
    return index;
  }

  #checksum(index: number): string {
    return (mix32(index ^ this.#salt) % CHECKSUM_SPACE).toString(36).padStart(4, '0');
  }

  #grow(): void {
    const capacity = this.#createdAt.length * 2;
    this.#createdAt = copyInto(new Float64Array(capacity), this.#createdAt);
    this.#delay = copyInto(new Uint32Array(capacity), this.#delay);
    this.#plate = copyInto(new Uint32Array(capacity), this.#plate);
    this.#failed = copyInto(new Uint8Array(capacity), this.#failed);
  }
}

function copyInto<T extends Float64Array | Uint32Array | Uint8Array>(target: T, source: T): T {
  target.set(source as never);
  return target;
}

/** A 32-bit integer hash (murmur3 finaliser): spreads consecutive indexes over the checksum space. */
export function mix32(value: number): number {
  let h = value >>> 0;
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

const A = 65;
const ZERO = 48;

/**
 * LLL D X DD, where X is a digit (old format) or a letter (Mercosul): 26³·10·36·100 = 632,736,000
 * values, so any valid plate fits a Uint32 and the two formats never collide.
 */
export function packPlate(plate: string): number {
  if (!/^[A-Z]{3}[0-9][A-Z0-9][0-9]{2}$/.test(plate)) throw new RangeError(`not a normalised plate: ${plate}`);
  const c = (i: number) => plate.charCodeAt(i);
  const x = c(4) >= A ? 10 + c(4) - A : c(4) - ZERO;
  const letters = ((c(0) - A) * 26 + (c(1) - A)) * 26 + (c(2) - A);
  return ((letters * 10 + (c(3) - ZERO)) * 36 + x) * 100 + (c(5) - ZERO) * 10 + (c(6) - ZERO);
}

export function unpackPlate(packed: number): string {
  let rest = packed;
  const d56 = rest % 100;
  rest = Math.floor(rest / 100);
  const x = rest % 36;
  rest = Math.floor(rest / 36);
  const d3 = rest % 10;
  rest = Math.floor(rest / 10);
  const l2 = rest % 26;
  rest = Math.floor(rest / 26);
  const l1 = rest % 26;
  const l0 = Math.floor(rest / 26);
  return (
    String.fromCharCode(A + l0, A + l1, A + l2, ZERO + d3, x >= 10 ? A + x - 10 : ZERO + x) +
    String(d56).padStart(2, '0')
  );
}

// What the simulator saw, so tests and benchmarks can check a client's behaviour from the
// upstream's side: duplicate creates, 429s, faults, and the densest burst any key produced.
// Per-plate and per-query counters are numeric (packed plates, query indexes) to stay small.
import { unpackPlate } from './store.js';

/** A stall of the simulator's own event loop (stall-watch.ts). */
export interface Stall {
  /** ms since the epoch of the last look before the stall: the stall began at or after it. */
  from: number;
  /** ms since the epoch of the look after it: the requests held meanwhile were seen then. */
  to: number;
}

export interface SimulatorStats {
  /** API requests received (admin and stats calls excluded). */
  requests: number;
  /** Requests that passed the key check and the limits, so they cost rate and quota. */
  counted: number;
  /** Queries created (including creates whose connection was then dropped). */
  creates: number;
  /** GETs answered 200. */
  gets: number;
  /** Status in the create response. */
  createsByStatus: Record<string, number>;
  responsesByStatus: Record<string, number>;
  /** 429s sent, for the rate limit or the quota. */
  rateLimited: number;
  /** The part of `rateLimited` sent because the daily quota was used up. */
  quotaExceeded: number;
  faults: SimulatorFaults;
  /** Counted requests (past the key and the limits: what the upstream bills or counts) by call. */
  countedCreates: number;
  countedGets: number;
  /** Queries held by the store (never cleared by a reset). */
  queries: number;
  /** Plates created more than once. */
  duplicateCreates: number;
  maxCreatesPerPlate: number;
  /** Largest number of counted requests one key made within any interval of the rate-limit duration. */
  maxInWindow: number;
  /** ms since the epoch. */
  firstRequestAt: number | null;
  lastRequestAt: number | null;
  /** Per key, by its label (the key spec's `label`, else `key1`, `key2`… in the order listed): never the key itself. */
  byKey: Record<string, KeyStats>;
  /** Only with `?plates=1` / `stats({ plates: true })`. */
  createsByPlate?: Record<string, number>;
  /**
   * Only with `?times=1` / `stats({ times: true })`: per key label, when each counted create and
   * get arrived (ms since the epoch, in order), so a client's use of each key's limit over any
   * span can be read from the upstream's side (benchmarks with many keys), and when each 429 for
   * the rate (not the quota) was sent.
   */
  timesByKey?: Record<string, { creates: number[]; gets: number[]; refused: number[] }>;
  /**
   * Only with `times`: when this process's event loop stalled (StallWatch), so a test can tell the
   * 429s a stall made (requests held, then seen at once) from those its client caused.
   */
  stalls?: Stall[];
  getsByQuery?: { max: number; total: number; queries: number };
}

export interface KeyStats {
  counted: number;
  rateLimited: number;
  maxInWindow: number;
  /** ms since the epoch of the first and last counted request. */
  firstAt: number | null;
  lastAt: number | null;
}

/** Faults injected, by kind; the `…AfterCreate` ones follow a query that was made (and paid). */
export interface SimulatorFaults {
  errors: number;
  drops: number;
  dropsAfterCreate: number;
  slowCreates: number;
  gatewayErrorsAfterCreate: number;
  cutBodiesAfterCreate: number;
  truncatedBodiesAfterCreate: number;
  stalledBodiesAfterCreate: number;
  pollsNotFound: number;
}

/** Creates per plate, keyed by the packed plate (a small integer, so the Map stays compact). */
export class PlateCounter {
  readonly #counts = new Map<number, number>();
  duplicates = 0;
  max = 0;

  add(packedPlate: number): number {
    const count = (this.#counts.get(packedPlate) ?? 0) + 1;
    this.#counts.set(packedPlate, count);
    if (count === 2) this.duplicates += 1;
    if (count > this.max) this.max = count;
    return count;
  }

  toRecord(): Record<string, number> {
    const out: Record<string, number> = {};
    for (const [packed, count] of this.#counts) out[unpackPlate(packed)] = count;
    return out;
  }
}

/** GETs per query index, in a growable typed array. */
export class IndexCounter {
  #counts = new Uint32Array(1024);
  total = 0;
  max = 0;
  queries = 0;

  add(index: number): void {
    if (index >= this.#counts.length) {
      let capacity = this.#counts.length;
      while (capacity <= index) capacity *= 2;
      const next = new Uint32Array(capacity);
      next.set(this.#counts);
      this.#counts = next;
    }
    const count = this.#counts[index]! + 1;
    this.#counts[index] = count;
    if (count === 1) this.queries += 1;
    if (count > this.max) this.max = count;
    this.total += 1;
  }
}

/** Timestamps within the last `durationMs`, growable (a fixed-window limiter can let 2×max through). */
export class WindowCounter {
  #ring = new Float64Array(64);
  #head = 0;
  #count = 0;

  /** Records a request at `now` and returns how many fall within (now - durationMs, now]. */
  push(now: number, durationMs: number): number {
    while (this.#count > 0 && this.#ring[this.#head]! + durationMs <= now) {
      this.#head = (this.#head + 1) % this.#ring.length;
      this.#count -= 1;
    }
    if (this.#count === this.#ring.length) {
      const next = new Float64Array(this.#ring.length * 2);
      for (let i = 0; i < this.#count; i += 1) next[i] = this.#ring[(this.#head + i) % this.#ring.length]!;
      this.#ring = next;
      this.#head = 0;
    }
    this.#ring[(this.#head + this.#count) % this.#ring.length] = now;
    this.#count += 1;
    return this.#count;
  }
}

export class StatsCollector {
  requests = 0;
  counted = 0;
  creates = 0;
  gets = 0;
  rateLimited = 0;
  quotaExceeded = 0;
  createsByStatus: Record<string, number> = {};
  responsesByStatus: Record<string, number> = {};
  faults: SimulatorFaults = {
    errors: 0,
    drops: 0,
    dropsAfterCreate: 0,
    slowCreates: 0,
    gatewayErrorsAfterCreate: 0,
    cutBodiesAfterCreate: 0,
    truncatedBodiesAfterCreate: 0,
    stalledBodiesAfterCreate: 0,
    pollsNotFound: 0,
  };
  countedCreates = 0;
  countedGets = 0;
  maxInWindow = 0;
  firstRequestAt: number | null = null;
  lastRequestAt: number | null = null;
  plates = new PlateCounter();
  getsByQuery = new IndexCounter();
  readonly #windows = new Map<string, WindowCounter>();
  readonly #byKey = new Map<string, KeyStats>();
  /** A double per counted request (kept until a reset, like the per-plate counts). */
  readonly #times = new Map<string, { creates: number[]; gets: number[]; refused: number[] }>();

  #keyStats(label: string): KeyStats {
    let stats = this.#byKey.get(label);
    if (!stats) {
      stats = { counted: 0, rateLimited: 0, maxInWindow: 0, firstAt: null, lastAt: null };
      this.#byKey.set(label, stats);
    }
    return stats;
  }

  #keyTimes(label: string): { creates: number[]; gets: number[]; refused: number[] } {
    let times = this.#times.get(label);
    if (!times) {
      times = { creates: [], gets: [], refused: [] };
      this.#times.set(label, times);
    }
    return times;
  }

  /** A 429 sent to the key with this label: for its rate at `now`, or (no time) for its quota. */
  keyRateLimited(label: string, now?: number): void {
    this.#keyStats(label).rateLimited += 1;
    if (now !== undefined) this.#keyTimes(label).refused.push(now);
  }

  request(now: number): void {
    this.requests += 1;
    this.firstRequestAt ??= now;
    this.lastRequestAt = now;
  }

  countedRequest(label: string, now: number, durationMs: number, kind: 'create' | 'get'): void {
    this.counted += 1;
    const times = this.#keyTimes(label);
    (kind === 'create' ? times.creates : times.gets).push(now);
    let window = this.#windows.get(label);
    if (!window) {
      window = new WindowCounter();
      this.#windows.set(label, window);
    }
    const inWindow = window.push(now, durationMs);
    if (inWindow > this.maxInWindow) this.maxInWindow = inWindow;
    const key = this.#keyStats(label);
    key.counted += 1;
    key.firstAt ??= now;
    key.lastAt = now;
    if (inWindow > key.maxInWindow) key.maxInWindow = inWindow;
  }

  created(packedPlate: number, status: string): void {
    this.creates += 1;
    this.createsByStatus[status] = (this.createsByStatus[status] ?? 0) + 1;
    this.plates.add(packedPlate);
  }

  got(index: number): void {
    this.gets += 1;
    this.getsByQuery.add(index);
  }

  response(status: number): void {
    this.responsesByStatus[String(status)] = (this.responsesByStatus[String(status)] ?? 0) + 1;
    if (status === 429) this.rateLimited += 1;
  }

  snapshot(queries: number, withPlates: boolean, withTimes = false, stalls: () => Stall[] = () => []): SimulatorStats {
    const out: SimulatorStats = {
      requests: this.requests,
      counted: this.counted,
      creates: this.creates,
      gets: this.gets,
      createsByStatus: { ...this.createsByStatus },
      responsesByStatus: { ...this.responsesByStatus },
      rateLimited: this.rateLimited,
      quotaExceeded: this.quotaExceeded,
      faults: { ...this.faults },
      countedCreates: this.countedCreates,
      countedGets: this.countedGets,
      queries,
      duplicateCreates: this.plates.duplicates,
      maxCreatesPerPlate: this.plates.max,
      maxInWindow: this.maxInWindow,
      firstRequestAt: this.firstRequestAt,
      lastRequestAt: this.lastRequestAt,
      byKey: Object.fromEntries([...this.#byKey].map(([label, stats]) => [label, { ...stats }])),
    };
    if (withTimes) {
      out.timesByKey = Object.fromEntries(
        [...this.#times].map(([label, t]) => [
          label,
          { creates: [...t.creates], gets: [...t.gets], refused: [...t.refused] },
        ]),
      );
      out.stalls = stalls();
    }
    if (withPlates) {
      out.createsByPlate = this.plates.toRecord();
      out.getsByQuery = { max: this.getsByQuery.max, total: this.getsByQuery.total, queries: this.getsByQuery.queries };
    }
    return out;
  }
}

// A query's life, pure: what is decided at creation (delay, failure, answered terminal at once)
// and what its status is at a given time. Randomness and the clock are arguments.

export type QueryStatus = 'PROCESSING' | 'COMPLETED' | 'FAILED';

export interface CreatePlan {
  delayMs: number;
  failed: boolean;
  /** The create response already carries the terminal state and result. */
  terminalOnCreate: boolean;
}

export interface LifecycleOptions {
  completionMs: readonly [number, number];
  failRate: number;
  failPlates: ReadonlySet<string>;
  terminalOnCreateRate: number;
}

/** `true` with probability `rate`; 0 and 1 decide without drawing, so such runs do not depend on `random`. */
export function chance(rate: number, random: () => number): boolean {
  if (rate <= 0) return false;
  if (rate >= 1) return true;
  return random() < rate;
}

/** Draws in a fixed order (terminal, failure, delay) so a seeded `random` gives repeatable runs. */
export function planCreate(plate: string, options: LifecycleOptions, random: () => number): CreatePlan {
  const terminalOnCreate = chance(options.terminalOnCreateRate, random);
  const failed = options.failPlates.has(plate) || chance(options.failRate, random);
  const [min, max] = options.completionMs;
  const delayMs = terminalOnCreate ? 0 : Math.round(min + random() * (max - min));
  return { delayMs, failed, terminalOnCreate };
}

export interface QueryTiming {
  createdAtMs: number;
  delayMs: number;
  failed: boolean;
}

export function statusAt(query: QueryTiming, now: number): { status: QueryStatus; completedAtMs?: number } {
  const completedAtMs = query.createdAtMs + query.delayMs;
  if (now < completedAtMs) return { status: 'PROCESSING' };
  return { status: query.failed ? 'FAILED' : 'COMPLETED', completedAtMs };
}

/** The upstream forgets a query `ttlMs` after its creation; `null` = never. */
export function isForgotten(query: QueryTiming, ttlMs: number | null, now: number): boolean {
  return ttlMs !== null && now - query.createdAtMs >= ttlMs;
}

// The daily quota, pure: which window `now` falls in, and a per-key counter that restarts when
// the window changes. Default windows are UTC days; tests pass a short windowMs instead.

export const DAY_MS = 86_400_000;

export interface QuotaWindowSpec {
  /** `null` = UTC days; else fixed windows of this length starting at `originMs`. */
  windowMs: number | null;
  originMs: number;
}

export function quotaWindow(now: number, spec: QuotaWindowSpec): { startMs: number; endMs: number } {
  if (spec.windowMs === null) {
    const startMs = Math.floor(now / DAY_MS) * DAY_MS;
    return { startMs, endMs: startMs + DAY_MS };
  }
  const startMs = spec.originMs + Math.floor((now - spec.originMs) / spec.windowMs) * spec.windowMs;
  return { startMs, endMs: startMs + spec.windowMs };
}

export interface QuotaState {
  used: number;
  remaining: number;
  resetAtMs: number;
  /** 0 while requests are left, else the wait until the window resets. */
  retryAfterMs: number;
}

export class QuotaCounter {
  #windowStart = Number.NaN;
  #used = 0;

  peek(now: number, limit: number, spec: QuotaWindowSpec): QuotaState {
    const { startMs, endMs } = quotaWindow(now, spec);
    if (startMs !== this.#windowStart) {
      this.#windowStart = startMs;
      this.#used = 0;
    }
    const remaining = Math.max(0, limit - this.#used);
    return { used: this.#used, remaining, resetAtMs: endMs, retryAfterMs: remaining > 0 ? 0 : endMs - now };
  }

  take(now: number, limit: number, spec: QuotaWindowSpec): QuotaState {
    this.peek(now, limit, spec);
    this.#used += 1;
    return this.peek(now, limit, spec);
  }
}

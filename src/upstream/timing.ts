// Pure timing: how long the upstream asks us to wait, and how long we wait when it does not say.
// Every function takes `now` (epoch ms) so tests need no clock. Every number the upstream sends is
// checked here (./bounds.ts): a wait past MAX_WAIT_MS, or a reset that far off, is no hint at all.
import { MAX_WAIT_MS, saneWait } from './bounds.js';

export interface RateLimitHeaders {
  limit?: number;
  remaining?: number;
  /** Epoch ms when the window resets (from X-RateLimit-Reset, Unix seconds). */
  resetAt?: number;
  /** The window `limit` counts over, when the upstream says it (RateLimit-Policy `w=`); else inferred from resets. */
  windowMs?: number;
}

function finiteNumber(value: string | undefined): number | undefined {
  if (value === undefined || value.trim() === '') return undefined;
  const n = Number(value);
  return Number.isFinite(n) ? n : undefined;
}

/** A count the upstream announced (a limit, what remains): past a billion it is not one. */
function count(value: string | undefined): number | undefined {
  const n = finiteNumber(value);
  return n !== undefined && n >= 0 && n <= 1e9 ? n : undefined;
}

/** `Retry-After` is either delta-seconds or an HTTP date (RFC 9110 §10.2.3). */
export function parseRetryAfter(value: string | undefined, now: number): number | undefined {
  if (value === undefined) return undefined;
  const seconds = finiteNumber(value);
  if (seconds !== undefined) return saneWait(seconds * 1000);
  const date = Date.parse(value);
  if (Number.isNaN(date)) return undefined;
  return saneWait(Math.max(0, date - now));
}

/** A reset time, when it is within MAX_WAIT_MS of now (else no usable hint). */
function saneReset(at: number, now: number): number | undefined {
  return Number.isFinite(at) && Math.abs(at - now) <= MAX_WAIT_MS ? at : undefined;
}

/** X-RateLimit-Reset: Unix seconds. Some servers send seconds-from-now instead; a small number is read that way. */
export function parseResetHeader(value: string | undefined, now: number): number | undefined {
  const n = finiteNumber(value);
  if (n === undefined || n < 0) return undefined;
  // Anything before 2001-09-09 as Unix seconds cannot be a reset time: read it as a delay.
  return saneReset(n < 1e9 ? now + n * 1000 : n * 1000, now);
}

/** `key=value` parameters of one structured-field item (`"default";q=100;w=60`), and a bare leading number as `_`. */
function itemParams(item: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const part of item.split(';').map((p) => p.trim())) {
    const pair = /^([a-z_]+)\s*=\s*"?(\d+(?:\.\d+)?)"?$/i.exec(part);
    if (pair) out[pair[1]!.toLowerCase()] = Number(pair[2]);
    else if (/^\d+(?:\.\d+)?$/.test(part)) out._ = Number(part);
  }
  return out;
}

/**
 * The IETF httpapi rate-limit fields: `RateLimit-Policy: "default";q=100;w=60` with
 * `RateLimit: "default";r=40;t=25` (draft 08 on), or the earlier drafts' `RateLimit-Policy: 100;w=60`
 * with `RateLimit-Limit`, `RateLimit-Remaining`, `RateLimit-Reset` (delta seconds). The first policy
 * listed is the one read. Undefined fields stay absent.
 */
export function parseIetfRateLimit(get: (name: string) => string | undefined, now: number): RateLimitHeaders {
  const out: RateLimitHeaders = {};
  const policy = get('ratelimit-policy');
  if (policy !== undefined) {
    const p = itemParams(policy.split(',')[0] ?? '');
    const limit = p.q ?? p._;
    if (limit !== undefined && limit > 0) out.limit = limit;
    if (p.w !== undefined && p.w > 0) out.windowMs = p.w * 1_000;
  }
  const current = get('ratelimit');
  if (current !== undefined) {
    const p = itemParams(current.split(',')[0] ?? '');
    // Draft 08+: r= remaining, t= seconds to reset; earlier drafts put limit, remaining, reset as
    // `limit=…, remaining=…, reset=…`.
    const remaining = p.r ?? p.remaining;
    const reset = p.t ?? p.reset;
    if (p.limit !== undefined && out.limit === undefined) out.limit = p.limit;
    if (remaining !== undefined) out.remaining = remaining;
    const at = reset === undefined ? undefined : saneReset(now + reset * 1_000, now);
    if (at !== undefined) out.resetAt = at;
  }
  const limit = count(get('ratelimit-limit'));
  if (limit !== undefined && out.limit === undefined) out.limit = limit;
  const remaining = count(get('ratelimit-remaining'));
  if (remaining !== undefined && out.remaining === undefined) out.remaining = remaining;
  const reset = finiteNumber(get('ratelimit-reset'));
  const resetAt = reset !== undefined && reset >= 0 ? saneReset(now + reset * 1_000, now) : undefined;
  if (resetAt !== undefined && out.resetAt === undefined) out.resetAt = resetAt;
  return out;
}

/** What the upstream says of its limit: the IETF fields first, then X-RateLimit-Limit/Remaining/Reset. */
export function parseRateLimitHeaders(
  headers: Record<string, string | string[] | undefined>,
  now: number,
): RateLimitHeaders {
  const get = (name: string): string | undefined => {
    const v = headers[name];
    return Array.isArray(v) ? v[0] : v;
  };
  const out: RateLimitHeaders = parseIetfRateLimit(get, now);
  if (out.limit !== undefined || out.remaining !== undefined || out.resetAt !== undefined) return out;
  const limit = count(get('x-ratelimit-limit'));
  const remaining = count(get('x-ratelimit-remaining'));
  const resetAt = parseResetHeader(get('x-ratelimit-reset'), now);
  if (limit !== undefined) out.limit = limit;
  if (remaining !== undefined) out.remaining = remaining;
  if (resetAt !== undefined) out.resetAt = resetAt;
  return out;
}

/**
 * How long a 429 asks us to wait, from the most precise hint present: the body's `retryAfterMs`
 * (our simulator's extension), `Retry-After`, the body's `retryAfter` (seconds), then the reset
 * time. Undefined when there is no hint at all.
 */
export function retryAfterFrom429(
  headers: Record<string, string | string[] | undefined>,
  body: unknown,
  now: number,
): number | undefined {
  const error = (body as { error?: { retryAfterMs?: unknown; retryAfter?: unknown } } | undefined)?.error;
  const fromMs = typeof error?.retryAfterMs === 'number' ? saneWait(error.retryAfterMs) : undefined;
  if (fromMs !== undefined) return fromMs;
  const header = headers['retry-after'];
  const fromHeader = parseRetryAfter(Array.isArray(header) ? header[0] : header, now);
  if (fromHeader !== undefined) return fromHeader;
  const fromSeconds = typeof error?.retryAfter === 'number' ? saneWait(error.retryAfter * 1000) : undefined;
  if (fromSeconds !== undefined) return fromSeconds;
  const { resetAt } = parseRateLimitHeaders(headers, now);
  return resetAt !== undefined ? Math.max(0, resetAt - now) : undefined;
}

/**
 * Exponential backoff with "full jitter" around the middle: base·2^attempt, capped, then spread
 * over [½, 1]× so that many workers that failed together do not come back together.
 */
export function backoffDelay(
  attempt: number,
  baseMs: number,
  capMs: number,
  random: () => number = Math.random,
): number {
  const exp = Math.min(capMs, baseMs * 2 ** Math.max(0, attempt));
  return Math.round(exp / 2 + (exp / 2) * random());
}

// Reading upstream answers as the contract doc allows: an `{statusCode, body}` envelope or a bare
// body, the id as `queryId` or `id`, states compared case-insensitively. HTTP failures become the
// typed errors of ./errors.ts. Pure: no I/O.
import {
  BadResponseError,
  ExpiredKeyError,
  InvalidKeyError,
  PermanentError,
  PermissionError,
  QUOTA_WAIT_MS,
  RateLimitedError,
  TransientError,
  type UpstreamError,
  type UpstreamOperation,
} from './errors.js';
import { retryAfterFrom429 } from './timing.js';

export type QueryState = 'pending' | 'completed' | 'failed';

export interface QueryOutcome {
  queryId: string;
  /** The status text as the upstream wrote it ('' when absent). */
  status: string;
  state: QueryState;
  terminal: boolean;
  /** The whole body of a finished query (result or failure reason); absent while pending. */
  result?: unknown;
}

const PENDING = new Set(['PROCESSING', 'PENDING', 'QUEUED', 'RUNNING', 'CREATED']);
const COMPLETED = new Set(['COMPLETED', 'SUCCESS', 'DONE', 'FINISHED']);
const FAILED = new Set(['FAILED', 'ERROR']);

/** Unknown states are pending: the poll deadline bounds them (the caller logs them). */
export function classifyStatus(status: string): { state: QueryState; known: boolean } {
  const s = status.toUpperCase();
  if (COMPLETED.has(s)) return { state: 'completed', known: true };
  if (FAILED.has(s)) return { state: 'failed', known: true };
  return { state: 'pending', known: PENDING.has(s) };
}

export function parseJson(text: string): { ok: true; value: unknown } | { ok: false } {
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch {
    return { ok: false };
  }
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The envelope's `body` when there is one, else the object itself. */
function unwrap(value: Record<string, unknown>): Record<string, unknown> {
  return 'body' in value && isObject(value.body) && typeof value.statusCode === 'number' ? value.body : value;
}

function snippet(text: string): string {
  const oneLine = text.replace(/\s+/g, ' ').trim();
  return oneLine.length > 120 ? `${oneLine.slice(0, 120)}…` : oneLine;
}

/** A 2xx answer to a create or a get, read into a QueryOutcome. */
export function parseQueryBody(
  operation: UpstreamOperation,
  status: number,
  text: string,
  knownQueryId?: string,
): QueryOutcome {
  const parsed = parseJson(text);
  if (!parsed.ok)
    throw new BadResponseError(
      operation,
      status,
      `the upstream answered ${status} with a body that is not JSON: ${snippet(text)}`,
    );
  if (!isObject(parsed.value))
    throw new BadResponseError(operation, status, `the upstream answered ${status} with JSON that is not an object`);
  const body = unwrap(parsed.value);
  const rawId = body.queryId ?? body.id ?? knownQueryId;
  const queryId = typeof rawId === 'number' ? String(rawId) : rawId;
  if (typeof queryId !== 'string' || queryId === '') {
    throw new BadResponseError(operation, status, `the upstream answered ${status} without a query id (queryId or id)`);
  }
  const statusText = typeof body.status === 'string' ? body.status : '';
  // A create without a status is a query that has started; a get without one we cannot judge yet.
  const { state } = statusText === '' ? { state: 'pending' as const } : classifyStatus(statusText);
  const terminal = state !== 'pending';
  return terminal
    ? { queryId, status: statusText, state, terminal, result: body }
    : { queryId, status: statusText, state, terminal };
}

/** A non-2xx answer, as the one typed error the queue knows what to do with. */
export function errorFromResponse(
  operation: UpstreamOperation,
  status: number,
  headers: Record<string, string | string[] | undefined>,
  text: string,
  now: number,
): UpstreamError {
  const parsed = parseJson(text);
  const body = parsed.ok && isObject(parsed.value) ? parsed.value : undefined;
  const error = body && isObject(body.error) ? body.error : undefined;
  const code = typeof error?.code === 'string' ? error.code : undefined;
  const message = typeof error?.message === 'string' ? error.message : snippet(text) || `HTTP ${status}`;

  if (status === 429 || code === 'RATE_LIMIT_EXCEEDED') {
    const retryAfterMs = retryAfterFrom429(headers, body, now);
    // The upstream's words are read here, once: a wait of hours, or a message about a daily or
    // monthly allowance, is a used-up quota rather than the per-window rate.
    const quota =
      (retryAfterMs !== undefined && retryAfterMs > QUOTA_WAIT_MS) ||
      /quota|daily|monthly|per day|per month/i.test(message);
    return new RateLimitedError(message, retryAfterMs, quota ? 'quota' : 'rate');
  }
  if (code === 'EXPIRED_API_KEY') return new ExpiredKeyError(message);
  if (code === 'INVALID_API_KEY' || status === 401) return new InvalidKeyError(message);
  if (code === 'INSUFFICIENT_PERMISSIONS' || status === 403) return new PermissionError(operation, message);
  if (status >= 500 || status === 408) {
    return new TransientError(`HTTP_${status}`, status, `the upstream answered ${status}: ${message}`, code);
  }
  return new PermanentError(status, message, code, operation);
}

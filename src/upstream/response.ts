// Reading upstream answers: what their bodies say is read by ./answers.ts (envelopes, id names,
// states, the operator's mapping); an answer it cannot read becomes UnrecognisedAnswerError, a body
// that is not JSON a BadResponseError. HTTP failures become the typed errors of ./errors.ts. Pure: no I/O.

import {
  type AnswerMapping,
  type AnswerShape,
  keepable,
  NO_MAPPING,
  type QueryState,
  readAnswer,
  StateLists,
} from './answers.js';
import { boundText, jsonTooDeep, MAX_JSON_DEPTH } from './bounds.js';
import {
  BadResponseError,
  ExpiredKeyError,
  InvalidKeyError,
  PermanentError,
  PermissionError,
  QUOTA_WAIT_MS,
  RateLimitedError,
  TransientError,
  UnrecognisedAnswerError,
  type UpstreamError,
  type UpstreamOperation,
} from './errors.js';
import { retryAfterFrom429 } from './timing.js';

export type { QueryState } from './answers.js';

export interface QueryOutcome {
  queryId: string;
  /** The status text as the upstream wrote it ('' when absent). */
  status: string;
  state: QueryState;
  terminal: boolean;
  /** The whole body of a finished query (result or failure reason); absent while pending. */
  result?: unknown;
  /** Where the id and the state were found (first contact keeps it per account). */
  shape?: AnswerShape;
}

const BUILT_IN_LISTS = new StateLists();

/** A state by the built-in lists alone (unknown: pending, `known` false). */
export function classifyStatus(status: string): { state: QueryState; known: boolean } {
  const state = BUILT_IN_LISTS.classify(status);
  return state === undefined ? { state: 'pending', known: false } : { state, known: true };
}

/** How answers are read: the operator's mapping and the state lists it makes (compiled once). */
export interface AnswerReader {
  mapping: AnswerMapping;
  lists: StateLists;
}

export function answerReader(mapping: AnswerMapping = NO_MAPPING): AnswerReader {
  return { mapping, lists: new StateLists(mapping) };
}

const DEFAULT_READER = answerReader();

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

function snippet(text: string): string {
  const oneLine = text.slice(0, 1_024).replace(/\s+/g, ' ').trim();
  return oneLine.length > 120 ? `${oneLine.slice(0, 120)}…` : oneLine;
}

/** A 2xx answer to a create or a get, read into a QueryOutcome. */
export function parseQueryBody(
  operation: UpstreamOperation,
  status: number,
  text: string,
  knownQueryId?: string,
  reader: AnswerReader = DEFAULT_READER,
): QueryOutcome {
  // Answers are data: one nested past the limit would overflow the stack of whatever walks it
  // next (the export, a diff), after a paid poll per attempt. It is refused here, once.
  if (jsonTooDeep(text))
    throw new BadResponseError(
      operation,
      status,
      `the upstream answered ${status} with JSON nested deeper than ${MAX_JSON_DEPTH} levels`,
      true,
    );
  const parsed = parseJson(text);
  if (!parsed.ok)
    throw new BadResponseError(
      operation,
      status,
      `the upstream answered ${status} with a body that is not JSON: ${snippet(text)}`,
    );
  if (!isObject(parsed.value))
    throw new BadResponseError(operation, status, `the upstream answered ${status} with JSON that is not an object`);
  return readParsed(operation, status, parsed.value, knownQueryId, reader);
}

/** An answer already parsed (or kept with a plate and read again under new settings). */
export function readParsed(
  operation: UpstreamOperation,
  status: number,
  value: unknown,
  knownQueryId: string | undefined,
  reader: AnswerReader,
): QueryOutcome {
  const read = readAnswer(operation, value, reader.mapping, reader.lists, knownQueryId);
  if (!read.ok) {
    throw new UnrecognisedAnswerError(operation, status, read.why, keepable(value), {
      ...(read.queryId !== undefined ? { queryId: read.queryId } : {}),
      ...(read.status !== undefined ? { status: read.status } : {}),
    });
  }
  const terminal = read.state !== 'pending';
  const outcome: QueryOutcome = {
    queryId: read.queryId,
    status: read.status,
    state: read.state,
    terminal,
    shape: read.shape,
  };
  if (terminal) outcome.result = read.result;
  return outcome;
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
  const message = typeof error?.message === 'string' ? boundText(error.message) : snippet(text) || `HTTP ${status}`;

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

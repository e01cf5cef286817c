// Every way an upstream call can fail, as a class with a stable `code`, the HTTP `status` (0 when no
// answer came) and a `kind` that names the class. What the queue does about each kind is decided
// in one table, workers/actions.ts; nothing here says whether to retry. Messages never hold the key.
//
// One way to identify an error: `isUpstreamError(e)` (the brand, see src/errors.ts), then `e.kind`.
import type { ErrorCode } from '../error-codes.js';
import { isError, VqbError } from '../errors.js';
import type { Unreadable } from './answers.js';
import { boundText, MAX_UPSTREAM_WORD } from './bounds.js';

export type UpstreamOperation = 'create' | 'get';

export type UpstreamErrorKind =
  | 'invalid-key'
  | 'expired-key'
  | 'permission'
  | 'rate-limited'
  | 'transient'
  | 'permanent'
  | 'bad-response'
  | 'unrecognised';

export function isUpstreamError(value: unknown): value is AnyUpstreamError {
  return isError(value, UpstreamError);
}

export abstract class UpstreamError extends VqbError {
  static override readonly brand: symbol = Symbol.for('vqb.error.UpstreamError');
  readonly status: number;
  abstract readonly kind: UpstreamErrorKind;
  /** The upstream's own error code, when it sent one. */
  readonly upstreamCode: string | undefined;
  /**
   * When the request was handed over (epoch ms, the client's clock), with the key read then;
   * unset when it failed before. A key failure is judged against it: a request sent before the
   * operator resumed the account carried the key as it was, not as it is.
   */
  sentAt: number | undefined;

  constructor(code: string, status: number, message: string, upstreamCode?: string, options?: { cause?: unknown }) {
    // The fixed codes (INVALID_API_KEY, RATE_LIMIT_EXCEEDED, BAD_RESPONSE, …) are in the error table;
    // the upstream's own codes, HTTP_<status> and the network codes pass through as outcome codes.
    // Every text here may be the upstream's: cut before the stack (and BullMQ, Redis, a log) copies it.
    super(boundText(code, MAX_UPSTREAM_WORD) as ErrorCode, boundText(message), options);
    this.name = 'UpstreamError';
    this.status = status;
    this.upstreamCode = upstreamCode === undefined ? undefined : boundText(upstreamCode, MAX_UPSTREAM_WORD);
  }
}

/** 401 INVALID_API_KEY: the key is unknown or revoked. Every request will fail the same way. */
export class InvalidKeyError extends UpstreamError {
  readonly kind = 'invalid-key';
  constructor(message: string) {
    super('INVALID_API_KEY', 401, message, 'INVALID_API_KEY');
    this.name = 'InvalidKeyError';
  }
}

/** 401 EXPIRED_API_KEY: the key was valid and has expired. */
export class ExpiredKeyError extends UpstreamError {
  readonly kind = 'expired-key';
  constructor(message: string) {
    super('EXPIRED_API_KEY', 401, message, 'EXPIRED_API_KEY');
    this.name = 'ExpiredKeyError';
  }
}

export const PERMISSION_FOR: Record<UpstreamOperation, string> = {
  create: 'Run vehicle queries',
  get: 'View queries already run',
};

/** 403 INSUFFICIENT_PERMISSIONS: the key lacks the permission this operation needs. */
export class PermissionError extends UpstreamError {
  readonly kind = 'permission';
  readonly operation: UpstreamOperation;
  readonly permission: string;
  constructor(operation: UpstreamOperation, upstreamMessage: string) {
    const permission = PERMISSION_FOR[operation];
    super(
      'INSUFFICIENT_PERMISSIONS',
      403,
      `the API key lacks the permission "${permission}" needed to ` +
        `${operation === 'create' ? 'create queries' : 'read query results'} (upstream: ${upstreamMessage})`,
      'INSUFFICIENT_PERMISSIONS',
    );
    this.name = 'PermissionError';
    this.operation = operation;
    this.permission = permission;
  }
}

/** Waits longer than this are a used-up quota (daily, monthly), not the per-minute rate. */
export const QUOTA_WAIT_MS = 10 * 60_000;

/**
 * 429 RATE_LIMIT_EXCEEDED. `retryAfterMs` is undefined when the upstream gave no hint. `scope` says
 * whether the per-window rate or a longer quota ran out, read from the answer where it is parsed.
 */
export class RateLimitedError extends UpstreamError {
  readonly kind = 'rate-limited';
  readonly retryAfterMs: number | undefined;
  readonly scope: 'rate' | 'quota';
  constructor(message: string, retryAfterMs: number | undefined, scope: 'rate' | 'quota' = 'rate') {
    super('RATE_LIMIT_EXCEEDED', 429, message, 'RATE_LIMIT_EXCEEDED');
    this.name = 'RateLimitedError';
    this.retryAfterMs = retryAfterMs;
    this.scope = scope;
  }
}

/** 5xx, connection reset or refused, timeouts: the request may work later. */
export class TransientError extends UpstreamError {
  readonly kind = 'transient';
  constructor(code: string, status: number, message: string, upstreamCode?: string, options?: { cause?: unknown }) {
    super(code, status, message, upstreamCode, options);
    this.name = 'TransientError';
  }
}

/** Any other 4xx (an invalid plate, an unknown queryId): the same request would fail again. */
export class PermanentError extends UpstreamError {
  readonly kind = 'permanent';
  /** Which call was answered so, when known (a poll's 404 may be an upstream that does not know a new query yet). */
  readonly operation: UpstreamOperation | undefined;
  constructor(status: number, message: string, upstreamCode?: string, operation?: UpstreamOperation) {
    super(upstreamCode ?? `HTTP_${status}`, status, message, upstreamCode);
    this.name = 'PermanentError';
    this.operation = operation;
  }
}

/**
 * A 2xx whose body we cannot use (not JSON, no query id): the upstream changed, or a proxy answered.
 * A poll may be tried again; a create may not, because the upstream may already have charged for it.
 */
export class BadResponseError extends UpstreamError {
  readonly kind = 'bad-response';
  readonly operation: UpstreamOperation;
  /**
   * The same request would be answered the same (JSON nested past the limit): a poll is not sent
   * again, it would only pay for the same answer.
   */
  readonly final: boolean;
  constructor(operation: UpstreamOperation, status: number, message: string, final = false) {
    super('BAD_RESPONSE', status, message);
    this.name = 'BadResponseError';
    this.operation = operation;
    this.final = final;
  }
}

/**
 * A 2xx JSON answer vqb cannot read: no query id it can find, or a state in none of its lists. It
 * is never guessed at: the account holds (UNRECOGNISED_ANSWER) until a setting reads it, and the
 * plate waits with the answer kept (`answer`: redacted, cut to a few KB). A create so answered was
 * made and paid: it is never sent again.
 */
export class UnrecognisedAnswerError extends UpstreamError {
  readonly kind = 'unrecognised';
  readonly operation: UpstreamOperation;
  readonly why: Unreadable;
  /** The answer as kept: secrets redacted, cut to a few KB (still JSON). */
  answer: unknown;
  /** The query id, when it could be read (an unknown state). */
  readonly queryId: string | undefined;
  /** The state as written (cut to a word's length, the key redacted by the client), when there was one. */
  state: string | undefined;
  constructor(
    operation: UpstreamOperation,
    status: number,
    why: Unreadable,
    answer: unknown,
    read: { queryId?: string; status?: string },
  ) {
    const state = read.status === undefined ? undefined : boundText(read.status, MAX_UPSTREAM_WORD);
    const what =
      why === 'no-id'
        ? 'no query id vqb can read'
        : why === 'no-state'
          ? 'no state vqb can read'
          : `the state ${JSON.stringify(state)}, in none of vqb's lists`;
    super('UNRECOGNISED_ANSWER', status, `the upstream answered a ${operation} ${status} with ${what}`);
    this.name = 'UnrecognisedAnswerError';
    this.operation = operation;
    this.why = why;
    this.answer = answer;
    this.queryId = read.queryId;
    this.state = state;
  }
}

export type AnyUpstreamError =
  | InvalidKeyError
  | ExpiredKeyError
  | PermissionError
  | RateLimitedError
  | TransientError
  | PermanentError
  | BadResponseError
  | UnrecognisedAnswerError;

// Every way an upstream call can fail, as a class with a stable `code`, the HTTP `status` (0 when no
// answer came) and `retryable`. What the queue does about each is decided in one table:
// workers/actions.ts. Messages never contain the API key.
import { VqbError } from '../errors.js';

export type UpstreamOperation = 'create' | 'get';

export abstract class UpstreamError extends VqbError {
  readonly status: number;
  abstract readonly retryable: boolean;
  /** The upstream's own error code, when it sent one. */
  readonly upstreamCode: string | undefined;

  constructor(code: string, status: number, message: string, upstreamCode?: string, options?: { cause?: unknown }) {
    super(code, message, options);
    this.name = 'UpstreamError';
    this.status = status;
    this.upstreamCode = upstreamCode;
  }
}

/** 401 INVALID_API_KEY: the key is unknown or revoked. Every request will fail the same way. */
export class InvalidKeyError extends UpstreamError {
  readonly retryable = false;
  constructor(message: string) {
    super('INVALID_API_KEY', 401, message, 'INVALID_API_KEY');
    this.name = 'InvalidKeyError';
  }
}

/** 401 EXPIRED_API_KEY: the key was valid and has expired. */
export class ExpiredKeyError extends UpstreamError {
  readonly retryable = false;
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
  readonly retryable = false;
  readonly operation: UpstreamOperation;
  readonly permission: string;
  constructor(operation: UpstreamOperation, upstreamMessage: string) {
    const permission = PERMISSION_FOR[operation];
    super(
      'INSUFFICIENT_PERMISSIONS',
      403,
      `the API key lacks the permission "${permission}" needed to ${operation === 'create' ? 'create queries' : 'read query results'} (upstream: ${upstreamMessage})`,
      'INSUFFICIENT_PERMISSIONS',
    );
    this.name = 'PermissionError';
    this.operation = operation;
    this.permission = permission;
  }
}

/** 429 RATE_LIMIT_EXCEEDED. `retryAfterMs` is undefined when the upstream gave no hint. */
export class RateLimitedError extends UpstreamError {
  readonly retryable = true;
  readonly retryAfterMs: number | undefined;
  constructor(message: string, retryAfterMs: number | undefined) {
    super('RATE_LIMIT_EXCEEDED', 429, message, 'RATE_LIMIT_EXCEEDED');
    this.name = 'RateLimitedError';
    this.retryAfterMs = retryAfterMs;
  }
}

/** 5xx, connection reset or refused, timeouts, a body that is not JSON: worth another try later. */
export class TransientError extends UpstreamError {
  readonly retryable = true;
  constructor(code: string, status: number, message: string, upstreamCode?: string, options?: { cause?: unknown }) {
    super(code, status, message, upstreamCode, options);
    this.name = 'TransientError';
  }
}

/** Any other 4xx (an invalid plate, an unknown queryId): the same request would fail again. */
export class PermanentError extends UpstreamError {
  readonly retryable = false;
  constructor(status: number, message: string, upstreamCode?: string) {
    super(upstreamCode ?? `HTTP_${status}`, status, message, upstreamCode);
    this.name = 'PermanentError';
  }
}

/**
 * A 2xx whose body we cannot use (not JSON, no query id): the upstream changed, or a proxy answered.
 * A poll may be tried again; a create may not, because the upstream may already have charged for it.
 */
export class BadResponseError extends UpstreamError {
  readonly retryable: boolean;
  constructor(operation: UpstreamOperation, status: number, message: string) {
    super('BAD_RESPONSE', status, message);
    this.name = 'BadResponseError';
    this.retryable = operation === 'get';
  }
}

// Every error the HTTP API answers with has the upstream's shape, `{statusCode, error: {code,
// message}}`, and a stable code clients can branch on. Messages of errors we raise on purpose go
// out as they are (they are written for users); anything unexpected becomes 500 INTERNAL with the
// request id, and its details (stack included) go to the log only.

import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { clock } from '../clock.js';
import { ERROR_CODES, type ErrorCode, errorCodeEntry } from '../error-codes.js';
import { InputError, isError, isVqbError, VqbError } from '../errors.js';

export interface ErrorBody {
  statusCode: number;
  error: { code: string; message: string };
}

/** An answer we give on purpose: its HTTP status is the code's, from the one error table. */
export class ApiError extends VqbError {
  static override readonly brand: symbol = Symbol.for('vqb.error.ApiError');
  readonly statusCode: number;

  constructor(code: ErrorCode, message: string, options?: { cause?: unknown }) {
    super(code, message, options);
    this.name = 'ApiError';
    this.statusCode = ERROR_CODES[code].status;
  }
}

/** Fastify's own errors (body parsing, validation) → our codes. */
const FASTIFY_CODES: Record<string, { status: number; code: string; message?: string }> = {
  FST_ERR_CTP_BODY_TOO_LARGE: { status: 413, code: 'PAYLOAD_TOO_LARGE' },
  FST_ERR_CTP_INVALID_MEDIA_TYPE: {
    status: 415,
    code: 'UNSUPPORTED_MEDIA_TYPE',
    message: 'send application/json, or text/csv or .xlsx to POST /v1/batches',
  },
  FST_ERR_CTP_INVALID_JSON_BODY: { status: 400, code: 'BAD_REQUEST', message: 'the body is not valid JSON' },
  FST_ERR_CTP_EMPTY_JSON_BODY: { status: 400, code: 'BAD_REQUEST' },
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: { status: 400, code: 'BAD_REQUEST' },
  FST_ERR_VALIDATION: { status: 400, code: 'VALIDATION_FAILED' },
  FST_ERR_BAD_URL: { status: 400, code: 'BAD_REQUEST' },
};

/** Other 4xx statuses fastify may raise, by status. */
const CODE_BY_STATUS: Record<number, string> = {
  400: 'BAD_REQUEST',
  401: 'UNAUTHORIZED',
  403: 'FORBIDDEN',
  404: 'NOT_FOUND',
  405: 'METHOD_NOT_ALLOWED',
  406: 'NOT_ACCEPTABLE',
  408: 'REQUEST_TIMEOUT',
  409: 'CONFLICT',
  413: 'PAYLOAD_TOO_LARGE',
  414: 'URI_TOO_LONG',
  415: 'UNSUPPORTED_MEDIA_TYPE',
  431: 'HEADERS_TOO_LARGE',
};

/** Our code for a 4xx status, when we have one. */
export function codeForStatus(status: number): string | undefined {
  return CODE_BY_STATUS[status];
}

export function errorBody(statusCode: number, code: string, message: string): ErrorBody {
  return { statusCode, error: { code, message } };
}

/** The client's view of an error, or undefined when it is unexpected (a 500 to be logged). */
export function describeError(err: unknown): ErrorBody | undefined {
  if (isVqbError(err)) {
    const known = errorCodeEntry(err.code);
    if (known) return errorBody(known.status, known.apiCode ?? err.code, err.message);
    return isError(err, InputError) ? errorBody(422, err.code, err.message) : undefined;
  }
  const fastifyError = err as Partial<FastifyError> | null;
  const fastifyCode = typeof fastifyError?.code === 'string' ? FASTIFY_CODES[fastifyError.code] : undefined;
  if (fastifyCode)
    return errorBody(
      fastifyCode.status,
      fastifyCode.code,
      fastifyCode.message ?? fastifyError?.message ?? fastifyCode.code,
    );
  const status = fastifyError?.statusCode;
  const statusCode = typeof status === 'number' && status >= 400 && status < 500 ? CODE_BY_STATUS[status] : undefined;
  if (statusCode !== undefined && typeof fastifyError?.message === 'string')
    return errorBody(status!, statusCode, fastifyError.message);
  return undefined;
}

/** The code each request ended with, for its one log line (a WeakMap, so no type augmentation). */
const errorCodes = new WeakMap<FastifyRequest, string>();

export function errorCodeOf(request: FastifyRequest): string | undefined {
  return errorCodes.get(request);
}

export function sendError(request: FastifyRequest, reply: FastifyReply, body: ErrorBody): FastifyReply {
  prepareError(request, reply, body);
  return reply.code(body.statusCode).type('application/json; charset=utf-8').send(body);
}

/**
 * The same answer from inside an onSend hook (the dashboard's own errors): headers set, the code
 * noted for the log line, and the payload to send in place of the one given.
 */
export function errorPayload(request: FastifyRequest, reply: FastifyReply, body: ErrorBody): string {
  prepareError(request, reply, body);
  void reply.code(body.statusCode).type('application/json; charset=utf-8');
  return JSON.stringify(body);
}

function prepareError(request: FastifyRequest, reply: FastifyReply, body: ErrorBody): void {
  errorCodes.set(request, body.error.code);
  if (body.statusCode === 401) void reply.header('www-authenticate', 'Bearer');
  closeIfBodyPending(request, reply);
}

/**
 * Answered before the body arrived in full (a 401 from the token check, a 413, a form refused
 * mid-way): close the connection after the answer, rather than read the rest of a body nobody will
 * use (Node would read it to keep the connection, however slowly it comes).
 *
 * The close waits LINGER_MS, reading nothing (the client's sending stalls): Node would destroy the
 * socket as soon as the answer is out, and a socket closed with unread bytes is reset, which can
 * reach a client still sending before it has read the answer (seen: the answer lost one time in
 * five on loopback).
 */
export function closeIfBodyPending(request: FastifyRequest, reply: FastifyReply): void {
  if (!bodyPending(request)) return;
  void reply.header('connection', 'close');
  const { socket } = request.raw;
  // What Node calls after an answer with `connection: close` (net.Socket#destroySoon): end, then destroy.
  socket.destroySoon = function lingeringClose(this: typeof socket) {
    request.raw.pause(); // Node resumes a request nobody read, to drop its body: not this one
    this.end();
    clock.setTimeout(() => this.destroy(), LINGER_MS).unref();
  };
}

/** How long a connection answered early stays open (unread) for the client to read the answer. */
export const LINGER_MS = 2_000;

function bodyPending(request: FastifyRequest): boolean {
  const { headers } = request;
  const hasBody =
    headers['transfer-encoding'] !== undefined ||
    (headers['content-length'] !== undefined && headers['content-length'] !== '0');
  return hasBody && !request.raw.complete;
}

/**
 * Error and not-found handlers for the whole instance. `redisDown` turns an unexpected failure
 * into 503 REDIS_UNAVAILABLE when Redis is the reason (the client may try again later).
 */
export function installErrorHandlers(app: FastifyInstance, redisDown: () => boolean): void {
  app.setErrorHandler((err, request, reply) => {
    const known = describeError(err);
    if (known) return sendError(request, reply, known);
    if (redisDown()) {
      request.log.warn({ err }, 'request failed: Redis is unreachable');
      return sendError(request, reply, errorBody(503, 'REDIS_UNAVAILABLE', 'Redis is unreachable; try again later'));
    }
    request.log.error({ err }, 'request failed');
    return sendError(
      request,
      reply,
      errorBody(500, 'INTERNAL', `internal error (request ${request.id}); the server log has the details`),
    );
  });
  app.setNotFoundHandler((request, reply) => {
    sendError(request, reply, errorBody(404, 'NOT_FOUND', `no route ${request.method} ${request.url.split('?')[0]}`));
  });
}

// The paid API, as two calls. Each call sends exactly one request: retries belong to the queue,
// which knows about attempts, deadlines and the global pace; a retry here would spend quota behind
// its back. Every answer's X-RateLimit-* headers update a snapshot the worker reads to pause early.

import { Agent, type Dispatcher, errors as undiciErrors } from 'undici';
import { clock } from '../clock.js';
import { isVqbError } from '../errors.js';
import { type Attributes, annotate, tracing } from '../telemetry/index.js';
import type { AnswerMapping, KeptAnswer } from './answers.js';
import { type Billing, billingFrom } from './billing.js';
import {
  type AnyUpstreamError,
  BadResponseError,
  isUpstreamError,
  TransientError,
  type UpstreamError,
  type UpstreamOperation,
} from './errors.js';
import type { KeyProvider } from './key.js';
import {
  type AnswerReader,
  answerReader,
  errorFromResponse,
  parseQueryBody,
  type QueryOutcome,
  readParsed,
} from './response.js';
import { parseRateLimitHeaders, type RateLimitHeaders } from './timing.js';
import { WRITTEN, withWriteNotice } from './written.js';

export interface QuotaSnapshot extends RateLimitHeaders {
  /** Epoch ms of the answer these numbers came from. */
  observedAt: number;
}

/** An answer read, with what its headers said of its price (upstream/billing.ts), when they said anything. */
export type AnsweredQuery = QueryOutcome & { billing?: Billing };

export interface UpstreamClientOptions {
  baseUrl: string;
  apiKey: KeyProvider;
  /** Injected for tests (MockAgent) and to share one pool; by default a keep-alive Agent is made. */
  dispatcher?: Dispatcher;
  connectTimeoutMs?: number;
  /** Headers timeout and body (idle) timeout, each; the whole request is bounded at twice this. */
  requestTimeoutMs?: number;
  /** Larger bodies are refused (the upstream documents 10 MB at most). */
  maxBodyBytes?: number;
  now?: () => number;
  /** How answers are read beyond what is plainly there (VQ_ANSWER_*, VQ_STATES_*; per account). */
  answers?: AnswerMapping;
}

export interface SendOptions {
  /**
   * Awaited after everything else is ready, immediately before the request is handed to undici (the
   * caller's pacing).
   */
  ready?: () => Promise<void>;
  /**
   * Called when the request is written to its socket, a connection opened first if none was free
   * (upstream/written.ts).
   */
  written?: () => void;
}

export type RequestObserver = (event: {
  operation: UpstreamOperation;
  status: number;
  /** From the call (its wait for the pace included) to its end. */
  durationMs: number;
  /** From the moment the request left to its answer (or failure); absent when it never left. */
  answerMs?: number;
  error?: AnyUpstreamError;
}) => void;

/** undici's and the socket's error codes → ours (a request that got no answer). */
export const NETWORK_CODES: Readonly<Record<string, string>> = {
  UND_ERR_CONNECT_TIMEOUT: 'CONNECT_TIMEOUT',
  UND_ERR_HEADERS_TIMEOUT: 'HEADERS_TIMEOUT',
  UND_ERR_BODY_TIMEOUT: 'BODY_TIMEOUT',
  UND_ERR_SOCKET: 'CONNECTION_RESET',
  ECONNRESET: 'CONNECTION_RESET',
  ECONNREFUSED: 'CONNECTION_REFUSED',
  EPIPE: 'CONNECTION_RESET',
  ETIMEDOUT: 'CONNECT_TIMEOUT',
};

export class UpstreamClient {
  readonly #origin: string;
  readonly #basePath: string;
  readonly #apiKey: KeyProvider;
  readonly #dispatcher: Dispatcher;
  readonly #ownsDispatcher: boolean;
  readonly #requestTimeoutMs: number;
  readonly #maxBodyBytes: number;
  readonly #now: () => number;
  readonly #reader: AnswerReader;
  #quota: QuotaSnapshot | undefined;
  #observers: RequestObserver[] = [];

  constructor(options: UpstreamClientOptions) {
    const base = new URL(options.baseUrl);
    this.#origin = base.origin;
    this.#basePath = base.pathname.replace(/\/+$/, '');
    this.#apiKey = options.apiKey;
    this.#requestTimeoutMs = options.requestTimeoutMs ?? 30_000;
    this.#maxBodyBytes = options.maxBodyBytes ?? 16 * 1024 * 1024;
    this.#now = options.now ?? clock.now;
    this.#reader = answerReader(options.answers);
    this.#ownsDispatcher = options.dispatcher === undefined;
    const dispatcher =
      options.dispatcher ??
      new Agent({
        // HTTP/1.1 as tested: undici 8 would speak HTTP/2 to a TLS upstream that offers it, a
        // protocol none of our tests or the simulator exercise (pacing, timeouts, the pool).
        allowH2: false,
        keepAliveTimeout: 30_000,
        connections: 64,
        connect: { timeout: options.connectTimeoutMs ?? 10_000 },
        headersTimeout: this.#requestTimeoutMs,
        bodyTimeout: this.#requestTimeoutMs,
      });
    this.#dispatcher = withWriteNotice(dispatcher);
  }

  /** Latest X-RateLimit-* numbers seen, if any answer carried them. */
  get quota(): QuotaSnapshot | undefined {
    return this.#quota;
  }

  onRequest(observer: RequestObserver): void {
    this.#observers.push(observer);
  }

  createQuery(plate: string, product = 'agregados', options: SendOptions = {}): Promise<AnsweredQuery> {
    return this.#call(
      'create',
      'POST',
      `/queries/integration/${encodeURIComponent(product)}`,
      JSON.stringify({ keys: { licensePlate: plate } }),
      options,
    );
  }

  getQuery(queryId: string, options: SendOptions = {}): Promise<AnsweredQuery> {
    return this.#call('get', 'GET', `/queries/integration/${encodeURIComponent(queryId)}`, undefined, options, queryId);
  }

  /**
   * An answer kept with its plate, read again with this client's settings (no request): an
   * UnrecognisedAnswerError when they still cannot read it.
   */
  reread(kept: KeptAnswer, knownQueryId?: string): QueryOutcome {
    return readParsed(kept.operation, kept.status, kept.answer, knownQueryId, this.#reader);
  }

  async close(): Promise<void> {
    if (this.#ownsDispatcher) await this.#dispatcher.close();
  }

  async #call(
    operation: UpstreamOperation,
    method: 'GET' | 'POST',
    path: string,
    body: string | undefined,
    options: SendOptions,
    knownQueryId?: string,
  ): Promise<AnsweredQuery> {
    const started = this.#now();
    let status = 0;
    let key: string | undefined;
    let sentAt: number | undefined;
    // The whole request's bound, cleared when it ends: AbortSignal.timeout's timer cannot be
    // cleared, so every request woke the process once more, twice the timeout later, to abort a
    // signal nobody listened to any longer (two wake-ups a plate at a steady rate).
    const bound = new AbortController();
    let boundTimer: NodeJS.Timeout | undefined;
    try {
      // The key is read after the wait for the slot (which can last a hold): a request that
      // waited across a rotation and `vqb resume` sends the new key, not the one it began with.
      await options.ready?.();
      sentAt = this.#now();
      key = await this.#apiKey();
      boundTimer = clock.setTimeout(() => bound.abort(timeoutReason()), this.#requestTimeoutMs * 2);
      const response = await this.#dispatcher.request({
        origin: this.#origin,
        path: this.#basePath + path,
        method,
        // The contract: the bare key, JSON content type on both calls.
        headers: { 'x-api-key': key, 'content-type': 'application/json', accept: 'application/json' },
        ...(body === undefined ? {} : { body }),
        // bodyTimeout is per chunk: a body that trickles a byte at a time needs an overall bound.
        signal: bound.signal,
        ...(options.written ? { [WRITTEN]: options.written } : {}),
      });
      status = response.statusCode;
      const now = this.#now();
      this.#updateQuota(response.headers, now);
      const text = await this.#readBody(operation, response);
      if (status >= 200 && status < 300) {
        const outcome = parseQueryBody(operation, status, text, knownQueryId, this.#reader);
        // A result that echoes the key would carry it into every export of the batch.
        if (outcome.result !== undefined && key && text.includes(key)) outcome.result = hideIn(outcome.result, key);
        this.#emit(operation, status, started, sentAt);
        const billing = billingFrom(response.headers);
        return billing ? { ...outcome, billing } : outcome;
      }
      throw errorFromResponse(operation, status, response.headers, text, now);
    } catch (err) {
      const error: AnyUpstreamError = this.#toUpstreamError(operation, status, err);
      error.sentAt = sentAt;
      // The upstream (or a proxy, or a lower layer quoting request headers) may echo the key back.
      scrubKey(error, key);
      if (error.kind === 'unrecognised' && key) {
        error.answer = hideIn(error.answer, key);
        // The state goes into the pause message (/healthz, webhooks, logs): redacted like the answer.
        if (error.state !== undefined) error.state = error.state.split(key).join('[redacted]');
      }
      this.#emit(operation, status, started, sentAt, error);
      throw error;
    } finally {
      clock.clearTimeout(boundTimer);
    }
  }

  /**
   * A 2xx body past the limit is unusable. An error answer past it is cut at the limit instead:
   * its status (429, 5xx, 4xx) still says what to do, and the body is only a hint.
   */
  async #readBody(operation: UpstreamOperation, response: Dispatcher.ResponseData): Promise<string> {
    const ok = response.statusCode >= 200 && response.statusCode < 300;
    const declared = Number(response.headers['content-length']);
    if (Number.isFinite(declared) && declared > this.#maxBodyBytes) {
      response.body.destroy();
      if (!ok) return '';
      throw new BadResponseError(
        operation,
        response.statusCode,
        `the upstream answered with ${declared} bytes, over the ${this.#maxBodyBytes}-byte limit`,
      );
    }
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of response.body) {
      const buffer = chunk as Buffer;
      if (size + buffer.length > this.#maxBodyBytes) {
        response.body.destroy();
        if (!ok) {
          chunks.push(buffer.subarray(0, this.#maxBodyBytes - size));
          break;
        }
        throw new BadResponseError(
          operation,
          response.statusCode,
          `the upstream answer passed the ${this.#maxBodyBytes}-byte limit`,
        );
      }
      size += buffer.length;
      chunks.push(buffer);
    }
    return Buffer.concat(chunks).toString('utf8');
  }

  #updateQuota(headers: Record<string, string | string[] | undefined>, now: number): void {
    const parsed = parseRateLimitHeaders(headers, now);
    if (parsed.limit !== undefined || parsed.remaining !== undefined || parsed.resetAt !== undefined) {
      this.#quota = { ...parsed, observedAt: now };
    }
  }

  #toUpstreamError(operation: UpstreamOperation, status: number, err: unknown): AnyUpstreamError {
    if (isUpstreamError(err)) return err;
    if (isVqbError(err)) throw err; // a ConfigError from the key provider is not an upstream failure
    const code = (err as { code?: string }).code;
    const name = (err as { name?: string }).name;
    if (name === 'TimeoutError' || name === 'AbortError' || err instanceof undiciErrors.RequestAbortedError) {
      return new TransientError(
        'REQUEST_TIMEOUT',
        status,
        `the upstream did not finish answering the ${operation} within ${this.#requestTimeoutMs * 2} ms`,
        undefined,
        {
          cause: err,
        },
      );
    }
    const mapped = (code && NETWORK_CODES[code]) ?? 'NETWORK_ERROR';
    return new TransientError(
      mapped,
      status,
      `${operation} request failed: ${(err as Error).message ?? String(err)}`,
      undefined,
      { cause: err },
    );
  }

  #emit(
    operation: UpstreamOperation,
    status: number,
    started: number,
    sentAt: number | undefined,
    error?: AnyUpstreamError,
  ): void {
    const now = this.#now();
    const event = {
      operation,
      status,
      durationMs: now - started,
      ...(sentAt === undefined ? {} : { answerMs: now - sentAt }),
      ...(error ? { error } : {}),
    };
    for (const observer of this.#observers) observer(event);
    if (tracing()) annotate(answerAttributes(status, error));
  }
}

/** Tracing: what the create's or poll's span carries of the answer (never its body, never the key). */
function answerAttributes(status: number, error?: UpstreamError): Attributes {
  const retryAfterMs = (error as { retryAfterMs?: number } | undefined)?.retryAfterMs;
  return {
    'http.response.status_code': status,
    ...(status === 429 ? { 'vqb.upstream.rate_limited': true } : {}),
    ...(retryAfterMs !== undefined ? { 'vqb.upstream.retry_after_ms': retryAfterMs } : {}),
    ...(error ? { 'vqb.upstream.error': error.code } : {}),
  };
}

/**
 * What the whole request's bound aborts with: the reason AbortSignal.timeout gives
 * (#toUpstreamError reads its name).
 */
function timeoutReason(): DOMException {
  return new DOMException('The operation was aborted due to timeout', 'TimeoutError');
}

/** The key, wherever an answer kept for a person to read repeats it. */
function hideIn(answer: unknown, key: string): unknown {
  const text = JSON.stringify(answer);
  return text.includes(key) ? JSON.parse(text.split(key).join('[redacted]')) : answer;
}

/** Replaces the key in an error's message and stack, down its cause chain (log serialisers print causes). */
function scrubKey(error: unknown, key: string | undefined): void {
  if (!key) return;
  const hide = (text: string) => text.split(key).join('[redacted]');
  const seen = new Set<unknown>();
  for (let current = error; current instanceof Error && !seen.has(current); current = current.cause) {
    seen.add(current);
    if (current.message.includes(key)) current.message = hide(current.message);
    if (typeof current.stack === 'string' && current.stack.includes(key)) current.stack = hide(current.stack);
  }
}

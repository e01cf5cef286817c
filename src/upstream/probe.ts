// One request to the upstream, kept whole: status, headers, the body as text and the round trip.
// `vqb check` shows the raw answers beside how vqb read them, which the client (client.ts) does not
// keep: it reads an answer and lets the text go. Same contract as the client (the bare key in
// x-api-key, JSON content type on both calls), one request each, no retry.

import { randomUUID } from 'node:crypto';
import { Agent, type Dispatcher } from 'undici';
import { clock } from '../clock.js';
import { boundText } from './bounds.js';
import { NETWORK_CODES as CLIENT_NETWORK_CODES } from './client.js';
import {
  type AnswerReader,
  answerReader,
  classifyStatus,
  errorFromResponse,
  parseQueryBody,
  type QueryOutcome,
} from './response.js';
import { parseRateLimitHeaders, type RateLimitHeaders } from './timing.js';

export interface RawAnswer {
  method: 'GET' | 'POST';
  /** The path asked for, below the base URL. */
  path: string;
  /** 0 when no answer came. */
  status: number;
  headers: Record<string, string>;
  /** The body as sent (cut past MAX_CHECK_BYTES), with the key replaced wherever it was echoed. */
  text: string;
  roundTripMs: number;
  /** What the network said when no answer came (CONNECTION_REFUSED, CONNECT_TIMEOUT, …). */
  networkError?: { code: string; message: string };
}

/** How vqb reads one answer: the outcome it would act on, or the error it would raise. */
export type AnswerReading =
  | {
      ok: true;
      outcome: QueryOutcome /** The status is in one of vqb's state lists (or absent). */;
      knownState: boolean;
    }
  | { ok: false; code: string; kind: string; message: string };

/**
 * Bytes of an answer `vqb check` reads (docs/security.md): enough for any error body or a result
 * shown to a person; the rest is not read, so a 1 GiB body costs 256 KiB.
 */
export const MAX_CHECK_BYTES = 256 * 1024;

/** The client's codes, and a host that does not resolve named as such (`vqb check` says it in words). */
const NETWORK_CODES: Readonly<Record<string, string>> = {
  ...CLIENT_NETWORK_CODES,
  ENOTFOUND: 'HOST_NOT_FOUND',
  EAI_AGAIN: 'HOST_NOT_FOUND',
};

export class UpstreamProbe {
  readonly #origin: string;
  readonly #basePath: string;
  readonly #key: string;
  readonly #dispatcher: Dispatcher;
  readonly #now: () => number;
  readonly #timeoutMs: number;

  constructor(options: { baseUrl: string; key: string; timeoutMs: number; now?: () => number }) {
    this.#timeoutMs = options.timeoutMs;
    const base = new URL(options.baseUrl);
    this.#origin = base.origin;
    this.#basePath = base.pathname.replace(/\/+$/, '');
    this.#key = options.key;
    this.#now = options.now ?? clock.now;
    this.#dispatcher = new Agent({
      allowH2: false, // HTTP/1.1, as the client (client.ts) speaks it
      connect: { timeout: options.timeoutMs },
      headersTimeout: options.timeoutMs,
      bodyTimeout: options.timeoutMs,
    });
  }

  /** A GET of a query id nobody made: a working key with view permission is answered 404, and nothing is created. */
  unknownQuery(): Promise<RawAnswer> {
    return this.get(`vqb-check-${randomUUID()}`);
  }

  get(queryId: string): Promise<RawAnswer> {
    return this.#send('GET', `/queries/integration/${encodeURIComponent(queryId)}`);
  }

  /** One real create: the upstream charges for it. */
  create(plate: string, product: string): Promise<RawAnswer> {
    return this.#send(
      'POST',
      `/queries/integration/${encodeURIComponent(product)}`,
      JSON.stringify({ keys: { licensePlate: plate } }),
    );
  }

  close(): Promise<void> {
    return this.#dispatcher.close();
  }

  async #send(method: 'GET' | 'POST', path: string, body?: string): Promise<RawAnswer> {
    const started = this.#now();
    // bodyTimeout is per chunk: a body trickled a byte at a time needs a bound on the whole.
    const signal = AbortSignal.timeout(this.#timeoutMs * 2);
    try {
      const response = await this.#dispatcher.request({
        origin: this.#origin,
        path: this.#basePath + path,
        method,
        headers: { 'x-api-key': this.#key, 'content-type': 'application/json', accept: 'application/json' },
        ...(body === undefined ? {} : { body }),
        signal,
      });
      const text = await readCapped(response.body);
      const headers: Record<string, string> = {};
      for (const [name, value] of Object.entries(response.headers)) {
        if (value !== undefined) headers[name] = Array.isArray(value) ? value.join(', ') : value;
      }
      return {
        method,
        path,
        status: response.statusCode,
        headers,
        text: this.#hide(text),
        roundTripMs: this.#now() - started,
      };
    } catch (err) {
      const raw = (err as { code?: string }).code;
      const name = (err as { name?: string }).name;
      const timedOut = signal.aborted || name === 'TimeoutError';
      const code = timedOut ? 'REQUEST_TIMEOUT' : ((raw && NETWORK_CODES[raw]) ?? 'NETWORK_ERROR');
      return {
        method,
        path,
        status: 0,
        headers: {},
        text: '',
        roundTripMs: this.#now() - started,
        networkError: {
          code,
          message: timedOut
            ? `the upstream did not finish answering within ${this.#timeoutMs * 2} ms`
            : this.#hide(boundText((err as Error).message ?? String(err))),
        },
      };
    }
  }

  #hide(text: string): string {
    return text.split(this.#key).join('[redacted]');
  }
}

/** At most MAX_CHECK_BYTES of a body, as text (cut with `…`); the rest is never read. */
async function readCapped(body: Dispatcher.ResponseData['body']): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    const buffer = chunk as Buffer;
    if (size + buffer.length > MAX_CHECK_BYTES) {
      chunks.push(buffer.subarray(0, MAX_CHECK_BYTES - size));
      body.destroy();
      return `${Buffer.concat(chunks).toString('utf8')}…`;
    }
    size += buffer.length;
    chunks.push(buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** The X-RateLimit-* (or RateLimit-*) numbers an answer announced. */
export function announcedLimit(answer: RawAnswer, now: number): RateLimitHeaders {
  return parseRateLimitHeaders(answer.headers, now);
}

/**
 * How vqb's upstream client reads an answer (src/upstream/response.ts): the one place `vqb check`
 * asks, so that a change to the reading shows here without touching the command.
 */
export function readAnswer(
  answer: RawAnswer,
  operation: 'create' | 'get',
  knownQueryId?: string,
  now: number = clock.now(),
  reader: AnswerReader = answerReader(),
): AnswerReading {
  if (answer.networkError) {
    return { ok: false, code: answer.networkError.code, kind: 'transient', message: answer.networkError.message };
  }
  try {
    if (answer.status >= 200 && answer.status < 300) {
      const outcome = parseQueryBody(operation, answer.status, answer.text, knownQueryId, reader);
      return { ok: true, outcome, knownState: outcome.status === '' || classifyStatus(outcome.status).known };
    }
    const error = errorFromResponse(operation, answer.status, answer.headers, answer.text, now);
    return { ok: false, code: error.code, kind: error.kind, message: error.message };
  } catch (err) {
    const error = err as { code?: string; kind?: string; message?: string };
    return {
      ok: false,
      code: error.code ?? 'BAD_RESPONSE',
      kind: error.kind ?? 'bad-response',
      message: String(error.message),
    };
  }
}

// The HTTP API below the routes: how long a client may take to send a request, what Node's HTTP
// parser answers before fastify sees a request, and what the request log shows of a URL.
//
// A request must arrive whole (headers and body) within VQ_HTTP_REQUEST_TIMEOUT, or the client gets
// 408 and the connection is closed: without that bound, connections that send a body slowly (or
// announce one and never send it) are held open for ever, and a few hundred of them hold the
// server's sockets and memory. Responses are not bounded by it (a large results download may take
// minutes); a connection idle for IDLE_SOCKET_MS in either direction is closed.
import { STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyBaseLogger } from 'fastify';
import type { Config } from '../config.js';
import { type ErrorBody, errorBody } from './errors.js';

/** A socket with no traffic either way for this long is closed (a client that stopped reading a download). */
export const IDLE_SOCKET_MS = 5 * 60_000;
/**
 * Idle keep-alive connections are kept this long: longer than the 60 s idle timeout of common
 * load balancers and proxies, so they close first and never reuse a connection we just closed.
 */
export const KEEP_ALIVE_MS = 72_000;

type HttpSettings = Pick<Config['http'], 'requestTimeoutMs'>;

/** fastify's server options for the timeouts above, and Node parser errors in our error shape. */
export function serverOptions(http: HttpSettings) {
  const requestTimeout = http.requestTimeoutMs;
  return {
    requestTimeout,
    connectionTimeout: Math.max(IDLE_SOCKET_MS, requestTimeout),
    keepAliveTimeout: KEEP_ALIVE_MS,
    http: {
      requestTimeout,
      // Headers are part of the request: never more time for them than for the whole.
      headersTimeout: Math.min(60_000, requestTimeout),
      // Node looks for expired requests at this interval (30 s by default, which would let a
      // short timeout run up to 30 s late).
      connectionsCheckingInterval: Math.max(100, Math.min(1_000, Math.floor(requestTimeout / 4))),
    },
    clientErrorHandler(this: { log: FastifyBaseLogger }, err: Error & { code?: string }, socket: Socket): void {
      answerClientError(err, socket, http, this.log);
    },
  };
}

/**
 * Node's 'clientError': a request the HTTP parser refused (malformed, headers too large) or one
 * that did not arrive in time. Nothing of it reached fastify, so the answer is written here, in
 * our shape, and the connection closed.
 */
export function answerClientError(
  err: Error & { code?: string },
  socket: Socket,
  http: HttpSettings,
  log: FastifyBaseLogger,
): void {
  // The peer went away: nothing to answer.
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  const body = clientErrorBody(err, http);
  log.debug({ code: body.error.code, parserCode: err.code, statusCode: body.statusCode }, 'client error');
  // A response already under way on this connection cannot be followed by another one.
  const inFlight = (socket as Socket & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
  if (socket.writable && inFlight?.headersSent !== true) {
    const json = JSON.stringify(body);
    socket.write(
      `HTTP/1.1 ${body.statusCode} ${STATUS_CODES[body.statusCode] ?? 'Error'}\r\nContent-Type: ` +
        `application/json; charset=utf-8\r\nContent-Length: ` +
        `${Buffer.byteLength(json)}\r\nConnection: close\r\n\r\n${json}`,
    );
  }
  // After the answer is flushed: the rest of what the client sends is not read.
  socket.destroySoon();
}

export function clientErrorBody(err: { code?: string }, http: HttpSettings): ErrorBody {
  switch (err.code) {
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return errorBody(
        408,
        'REQUEST_TIMEOUT',
        `the request did not arrive in full within ${http.requestTimeoutMs} ms (VQ_HTTP_REQUEST_TIMEOUT)`,
      );
    case 'HPE_HEADER_OVERFLOW':
      return errorBody(431, 'HEADERS_TOO_LARGE', 'the request headers are too large');
    default:
      return errorBody(400, 'BAD_REQUEST', `not a valid HTTP/1.1 request${err.code ? ` (${err.code})` : ''}`);
  }
}

/** Query parameters that carry credentials, compared lower-case without `-` and `_`. */
const SECRET_PARAMS = new Set([
  'token',
  'accesstoken',
  'apikey',
  'xapikey',
  'key',
  'authorization',
  'auth',
  'password',
  'secret',
]);

/**
 * The URL as the request log shows it: a credential in the query string (a token sent as
 * `?token=…`, refused, but still in the URL) is replaced by `[redacted]`; the rest is kept as sent.
 */
export function loggedUrl(url: string): string {
  const at = url.indexOf('?');
  if (at === -1) return url;
  const query = url
    .slice(at + 1)
    .split('&')
    .map((pair) => {
      const eq = pair.indexOf('=');
      const name = eq === -1 ? pair : pair.slice(0, eq);
      return SECRET_PARAMS.has(normalizedName(name))
        ? `${name.length > 64 ? name.slice(0, 64) : name}=[redacted]`
        : pair;
    });
  return `${url.slice(0, at)}?${query.join('&')}`;
}

function normalizedName(name: string): string {
  let decoded = name;
  try {
    decoded = decodeURIComponent(name.replace(/\+/g, ' '));
  } catch {
    // Malformed escapes: compare as sent.
  }
  return decoded.toLowerCase().replace(/[-_\s]/g, '');
}

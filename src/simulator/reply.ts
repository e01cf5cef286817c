// What the request handlers decide, as data: the HTTP layer (server.ts) only waits, writes or drops.

/**
 * respond: status, headers, body. drop: the socket is destroyed before any answer. cut: the headers
 * and the first `sendBytes` of the body go out (Content-Length promises all of it), then the
 * socket is destroyed. stall: the headers go out and the body never comes.
 */
export type Reply =
  | { kind: 'respond'; status: number; headers: Record<string, string>; body: string; delayMs: number }
  | { kind: 'drop'; delayMs: number }
  | { kind: 'cut'; status: number; headers: Record<string, string>; body: string; sendBytes: number; delayMs: number }
  | { kind: 'stall'; status: number; headers: Record<string, string>; body: string; delayMs: number };

export type Respond = Extract<Reply, { kind: 'respond' }>;

export function jsonReply(status: number, value: unknown, headers: Record<string, string> = {}): Respond {
  return {
    kind: 'respond',
    status,
    headers: { 'content-type': 'application/json; charset=utf-8', ...headers },
    body: JSON.stringify(value),
    delayMs: 0,
  };
}

/** The contract's error body: `{"statusCode":N,"error":{"code","message",...extra}}`. */
export function errorReply(
  status: number,
  code: string,
  message: string,
  headers: Record<string, string> = {},
  extra: Record<string, unknown> = {},
): Reply {
  return jsonReply(status, { statusCode: status, error: { code, message, ...extra } }, headers);
}

export function htmlReply(status: number, html: string, headers: Record<string, string> = {}): Reply {
  return {
    kind: 'respond',
    status,
    headers: { 'content-type': 'text/html; charset=utf-8', ...headers },
    body: html,
    delayMs: 0,
  };
}

// An upstream that answers badly on purpose: a loopback server in front of the simulator that
// forwards every request, except those a rule of the test's answers itself (a 5 MB message, a
// state echoing the key, a wait of 1e300 ms, a body trickled a byte at a time, a 1 GiB body).
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Redis } from 'ioredis';

export interface HostileRequest {
  method: string;
  path: string;
  /** x-api-key as sent. */
  key: string;
  body: string;
}

/**
 * What the server answers itself: a status, headers and a body (or a writer that streams one).
 * Status 0: the simulator's answer, forwarded with `headers` over its own (an X-RateLimit-Reset).
 */
export interface HostileAnswer {
  status: number;
  headers?: Record<string, string>;
  body?: string | ((res: ServerResponse) => void);
}

export type HostileRule = (request: HostileRequest) => HostileAnswer | undefined;

export interface HostileUpstream {
  url: string;
  /** Where requests no rule answers go (the simulator's URL); unset: 404. */
  target: string | undefined;
  rule: HostileRule;
  /** Requests the rule answered, by method and path. */
  answered: HostileRequest[];
  close(): Promise<void>;
}

export async function startHostileUpstream(rule: HostileRule = () => undefined): Promise<HostileUpstream> {
  const open = new Set<ServerResponse>();
  const upstream: HostileUpstream = {
    url: '',
    target: undefined,
    rule,
    answered: [],
    close: async () => {
      for (const res of open) res.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
  const server = createServer(async (req: IncomingMessage, res: ServerResponse) => {
    open.add(res);
    res.on('close', () => open.delete(res));
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const request: HostileRequest = {
      method: req.method ?? 'GET',
      path: req.url ?? '/',
      key: String(req.headers['x-api-key'] ?? ''),
      body: Buffer.concat(chunks).toString('utf8'),
    };
    const answer = upstream.rule(request);
    if (answer && answer.status !== 0) {
      upstream.answered.push(request);
      res.writeHead(answer.status, { 'content-type': 'application/json', ...answer.headers });
      if (typeof answer.body === 'function') answer.body(res);
      else res.end(answer.body ?? '');
      return;
    }
    if (!upstream.target) {
      res.writeHead(404).end();
      return;
    }
    const forwarded = await fetch(`${upstream.target}${request.path}`, {
      method: request.method,
      headers: { 'x-api-key': request.key, 'content-type': 'application/json' },
      ...(request.method === 'GET' ? {} : { body: request.body }),
    });
    const headers: Record<string, string> = {};
    forwarded.headers.forEach((v, k) => {
      if (k !== 'content-length' && k !== 'transfer-encoding' && k !== 'connection') headers[k] = v;
    });
    if (answer) upstream.answered.push(request);
    res.writeHead(forwarded.status, { ...headers, ...answer?.headers });
    res.end(Buffer.from(await forwarded.arrayBuffer()));
  });
  server.keepAliveTimeout = 100;
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  upstream.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return upstream;
}

/** The contract's error body with `message` (and more fields of `error`). */
export function errorBody(status: number, code: string, message: string, more: object = {}): string {
  return JSON.stringify({ statusCode: status, error: { code, message, ...more } });
}

/**
 * The bytes Redis holds for a test's keys (MEMORY USAGE of each, summed): those under `{p}` and
 * the accounts' `p:{…}` (as deleteKeysByPrefix finds them), so other users of the server count not.
 */
export async function prefixBytes(redis: Redis, prefix: string): Promise<number> {
  const tag = /^\{([^{}]+)\}/.exec(prefix)?.[1];
  let total = 0;
  for (const match of [`${prefix}*`, ...(tag ? [`${tag}:{*`] : [])]) {
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', match.replace(/[[\]]/g, '\\$&'), 'COUNT', 1000);
      cursor = next;
      for (const key of keys) total += Number((await redis.memory('USAGE', key, 'SAMPLES', 0)) ?? 0);
    } while (cursor !== '0');
  }
  return total;
}

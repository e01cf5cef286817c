// The HTTP layer: read the request, ask the engine (or the admin handler) what to do, then wait
// the chosen latency and write the reply, or destroy the socket for a dropped request.
// node:http rather than a framework, because dropping a connection mid-request needs the socket.

import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { clock } from '../clock.js';
import { handleAdmin, isAdminPath } from './admin.js';
import type { SimulatorEngine } from './engine.js';
import { errorReply, type Reply } from './reply.js';

export interface RunningServer {
  server: Server;
  url: string;
  port: number;
  close(): Promise<void>;
}

export async function listen(engine: SimulatorEngine, host: string, port: number): Promise<RunningServer> {
  const pending = new Set<NodeJS.Timeout>();
  let closing = false;

  const server = createServer((req, res) => {
    // Counted when its headers arrive, as a gateway in front of an API counts: reading the body
    // takes more turns of this process's event loop, which a busy test machine stretches.
    const receivedAt = engine.now();
    readBody(req, engine.options.maxBodyBytes).then(
      ({ body, tooLarge }) => {
        if (closing) return req.socket.destroy();
        carryOut(req, res, decide(engine, req, body, tooLarge, receivedAt), pending);
      },
      () => req.socket.destroy(),
    );
  });
  // Clients' keep-alive sockets must not hold the server open after close().
  server.keepAliveTimeout = 5_000;

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  const shownHost = address.family === 'IPv6' ? `[${address.address}]` : address.address;

  return {
    server,
    url: `http://${shownHost}:${address.port}`,
    port: address.port,
    close: () =>
      new Promise<void>((resolve, reject) => {
        closing = true;
        for (const timer of pending) clock.clearTimeout(timer);
        pending.clear();
        server.close((error) => (error ? reject(error) : resolve()));
        server.closeAllConnections();
      }),
  };
}

function decide(
  engine: SimulatorEngine,
  req: IncomingMessage,
  body: string,
  tooLarge: boolean,
  receivedAt: number,
): Reply {
  const method = req.method ?? 'GET';
  try {
    const url = new URL(req.url ?? '/', 'http://simulator.invalid');
    if (isAdminPath(url.pathname)) return handleAdmin(engine, method, url.pathname, url.searchParams, body);
    const apiKey = req.headers['x-api-key'];
    return engine.handle({
      method,
      path: url.pathname,
      apiKey: typeof apiKey === 'string' && apiKey !== '' ? apiKey : undefined,
      body,
      bodyTooLarge: tooLarge,
      receivedAt,
    });
  } catch (error) {
    // A bug in the simulator, not a simulated fault: say so plainly.
    return errorReply(500, 'SIMULATOR_BUG', (error as Error).message);
  }
}

function carryOut(req: IncomingMessage, res: ServerResponse, reply: Reply, pending: Set<NodeJS.Timeout>): void {
  const act = () => {
    if (reply.kind === 'drop') {
      req.socket.destroy();
      return;
    }
    const bytes = Buffer.from(reply.body, 'utf8');
    res.writeHead(reply.status, { ...reply.headers, 'content-length': bytes.length });
    if (reply.kind === 'respond') {
      res.end(bytes);
      return;
    }
    // cut: part of the body, then a reset; stall: the headers only, the socket left open.
    res.flushHeaders();
    if (reply.kind === 'cut')
      res.write(bytes.subarray(0, reply.sendBytes), () => clock.setTimeout(() => req.socket.destroy(), 20));
  };
  if (reply.delayMs <= 0) {
    act();
    return;
  }
  const timer = clock.setTimeout(() => {
    pending.delete(timer);
    act();
  }, reply.delayMs);
  pending.add(timer);
}

/** Reads the body as UTF-8; past `limit` bytes it keeps draining but stops storing. */
function readBody(req: IncomingMessage, limit: number): Promise<{ body: string; tooLarge: boolean }> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let tooLarge = false;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        tooLarge = true;
        chunks.length = 0;
      } else if (!tooLarge) {
        chunks.push(chunk);
      }
    });
    req.on('end', () => resolve({ body: tooLarge ? '' : Buffer.concat(chunks).toString('utf8'), tooLarge }));
    req.on('error', reject);
  });
}

// A webhook receiver for tests: a real node:http server on a loopback port that verifies every
// delivery with the `standardwebhooks` package (as a customer's application would), records it,
// and answers what the test says (a status, or never).
import { once } from 'node:events';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';

export interface Delivery {
  id: string;
  timestamp: number;
  signature: string;
  body: string;
  /** The payload, as Webhook.verify returned it; undefined when verification failed. */
  payload: any;
  verifyError?: string;
  path: string;
}

/** What to answer the n-th delivery (0-based): a status, or 'hang' (never answer). */
export type Answerer = (n: number, delivery: Delivery) => number | 'hang';

export interface Receiver {
  url: string;
  /** The loopback port it listens on. */
  port: number;
  deliveries: Delivery[];
  /** TCP connections it accepted, whether or not a request followed. */
  connections(): number;
  /** Resolves once at least `n` deliveries arrived (no sleeping: woken by each arrival). */
  waitFor(n: number, predicate?: (d: Delivery) => boolean): Promise<Delivery[]>;
  close(): Promise<void>;
}

export async function startReceiver(secret: string, answer: Answerer = () => 204): Promise<Receiver> {
  const verifier = new Webhook(secret);
  const deliveries: Delivery[] = [];
  const waiters = new Set<() => void>();
  const hanging = new Set<ServerResponse>();
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const headers = {
        'webhook-id': String(req.headers['webhook-id'] ?? ''),
        'webhook-timestamp': String(req.headers['webhook-timestamp'] ?? ''),
        'webhook-signature': String(req.headers['webhook-signature'] ?? ''),
      };
      const delivery: Delivery = {
        id: headers['webhook-id'],
        timestamp: Number(headers['webhook-timestamp']),
        signature: headers['webhook-signature'],
        body,
        payload: undefined,
        path: req.url ?? '',
      };
      try {
        delivery.payload = verifier.verify(body, headers);
      } catch (err) {
        delivery.verifyError = (err as Error).message;
      }
      const n = deliveries.length;
      deliveries.push(delivery);
      const status = answer(n, delivery);
      if (status === 'hang') hanging.add(res);
      else res.writeHead(status).end();
      for (const wake of [...waiters]) wake();
    });
  });
  let connections = 0;
  server.on('connection', () => {
    connections++;
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const port = (server.address() as AddressInfo).port;
  const url = `http://127.0.0.1:${port}/hooks`;
  return {
    url,
    port,
    deliveries,
    connections: () => connections,
    waitFor(n, predicate = () => true) {
      return new Promise((resolve) => {
        const check = () => {
          const matching = deliveries.filter(predicate);
          if (matching.length >= n) {
            waiters.delete(check);
            resolve(matching);
          }
        };
        waiters.add(check);
        check();
      });
    },
    async close() {
      for (const res of hanging) res.destroy();
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

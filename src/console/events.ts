// Server-sent events for the console's live progress: one stream per open page, which looks at the
// batches every EVENT_INTERVAL_MS and sends them only when something changed (a comment now and
// then keeps proxies from closing a quiet stream). The page works without it.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { CONTENT_SECURITY_POLICY } from './assets.js';

const EVENT_INTERVAL_MS = 1_000;
const HEARTBEAT_MS = 15_000;

/** Open streams, so the server can end them when it stops (they never end by themselves). */
export type OpenStreams = Set<{ end(): void }>;

/** Streams `event: <name>` with what `produce` returns, until the client goes or the server stops. */
export async function streamEvents(
  request: FastifyRequest,
  reply: FastifyReply,
  streams: OpenStreams,
  name: string,
  produce: () => Promise<string>,
): Promise<void> {
  reply.hijack();
  const res = reply.raw;
  res.writeHead(200, {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-store',
    'x-content-type-options': 'nosniff',
    'content-security-policy': CONTENT_SECURITY_POLICY,
  });
  let last = '';
  let closed = false;
  let timer: NodeJS.Timeout | undefined;
  let lastWrite = Date.now();
  const stream = {
    end() {
      closed = true;
      clearTimeout(timer);
      res.end();
    },
  };
  streams.add(stream);
  request.raw.on('close', () => {
    closed = true;
    clearTimeout(timer);
    streams.delete(stream);
  });
  const tick = async () => {
    try {
      const data = await produce();
      if (closed) return;
      if (data !== last) {
        res.write(`event: ${name}\ndata: ${data}\n\n`);
        last = data;
        lastWrite = Date.now();
      } else if (Date.now() - lastWrite >= HEARTBEAT_MS) {
        res.write(': still here\n\n');
        lastWrite = Date.now();
      }
    } catch (err) {
      // Redis away for a moment: the page keeps its last numbers; the next tick tries again.
      request.log.warn({ err: (err as Error).message }, 'console live update failed');
    }
    if (!closed) timer = setTimeout(tick, EVENT_INTERVAL_MS);
  };
  await tick();
}

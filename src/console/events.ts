// Server-sent events for the console's live progress: one stream per open page, which looks at the
// batches every EVENT_INTERVAL_MS while they move and sends them only when something changed (a
// comment now and then keeps proxies from closing a quiet stream). A page whose batches are all
// finished looks again only when its accounts get new work (wake-news.ts: a message), at most
// every EVENT_INTERVAL_MS, and at the heartbeat. The page works without it.
//
// Issue 35 (7): a stream once outlived its session (sign-out, a revoked token) and kept sending,
// and one session could open any number of them (20 took Redis from 8 to 1,450 commands/s). Now
// every tick asks `alive` first (the session still in Redis, its token still configured) and the
// stream ends, with an `end` event, the first tick it is not; signing out ends the session's
// streams in this process at once. A session holds at most `perOwner` streams per process, and
// everyone together `inAll`; one more is refused with 429 (an EventSource that gets an error
// status does not reconnect, so a fifth tab simply keeps the numbers of its page load; closing
// the oldest instead would make the tabs' reconnections take each other's places, round and
// round).

import type { FastifyReply, FastifyRequest } from 'fastify';
import { clock } from '../clock.js';
import { ApiError } from '../http/errors.js';
import { CONTENT_SECURITY_POLICY } from './assets.js';
import type { WakeNews } from './wake-news.js';

const EVENT_INTERVAL_MS = 1_000;
const HEARTBEAT_MS = 15_000;

interface Stream {
  owner: string;
  end(): void;
}

/** The open streams of this process, by session (its id's hash), so the server can end them. */
export class OpenStreams {
  readonly #byOwner = new Map<string, Set<Stream>>();
  #total = 0;

  /** The owner's open streams; without an owner, everyone's. */
  count(owner?: string): number {
    return owner === undefined ? this.#total : (this.#byOwner.get(owner)?.size ?? 0);
  }

  add(stream: Stream): void {
    const own = this.#byOwner.get(stream.owner) ?? new Set();
    if (!own.has(stream)) this.#total++;
    own.add(stream);
    this.#byOwner.set(stream.owner, own);
  }

  delete(stream: Stream): void {
    const own = this.#byOwner.get(stream.owner);
    if (own?.delete(stream)) this.#total--;
    if (own?.size === 0) this.#byOwner.delete(stream.owner);
  }

  /** Ends a session's streams (it signed out). */
  endOwner(owner: string): void {
    for (const stream of [...(this.#byOwner.get(owner) ?? [])]) stream.end();
  }

  /** Ends every stream (the server stops: they never end by themselves). */
  endAll(): void {
    for (const own of [...this.#byOwner.values()]) for (const stream of [...own]) stream.end();
  }
}

export interface StreamSpec {
  /** The `event:` name of the updates. */
  name: string;
  /** The session's id hash: whose stream this is. */
  owner: string;
  /** Most streams one owner may hold open. */
  perOwner: number;
  /** Most streams everyone together may hold open in this process. */
  inAll: number;
  /** False when the session is gone: the stream ends (a throw is a failed tick: Redis away). */
  alive: () => Promise<boolean>;
  produce: () => Promise<Produced>;
  /** Where new work is heard (a stream that cannot listen looks every EVENT_INTERVAL_MS). */
  wakes: WakeNews;
  /** How long a stream showing only finished batches waits for new work before it looks anyway. */
  idleMs: number;
}

export interface Produced {
  data: string;
  /**
   * Set when nothing shown moves by itself (every batch finished): the accounts whose new work
   * could change it. The stream then waits for a wake of one of them, or the heartbeat.
   */
  still?: (account: string) => boolean;
}

/**
 * Streams `event: <name>` with what `produce` returns, until the client goes, the server stops or
 * the session ends. Throws ApiError TOO_MANY_STREAMS (before anything is sent) when the owner
 * already holds `perOwner` streams.
 */
export async function streamEvents(
  request: FastifyRequest,
  reply: FastifyReply,
  streams: OpenStreams,
  spec: StreamSpec,
): Promise<void> {
  const { name, owner, alive, produce } = spec;
  // Counted and added with no await between: two requests at once cannot both take the last place.
  if (streams.count(owner) >= spec.perOwner)
    throw new ApiError(
      'TOO_MANY_STREAMS',
      `this session already follows live updates in ${spec.perOwner} pages; close one ` +
        '(this page keeps its numbers of when it loaded)',
    );
  if (streams.count() >= spec.inAll)
    throw new ApiError(
      'TOO_MANY_STREAMS',
      `this server already sends live updates to ${spec.inAll} pages; this page keeps its numbers of when it loaded`,
    );
  let closed = false;
  let timer: NodeJS.Timeout | undefined;
  const res = reply.raw;
  const stream: Stream = {
    owner,
    end() {
      if (closed) return;
      stop();
      // Tells the page not to reconnect (the script closes its EventSource on it).
      res.end('event: end\ndata: {}\n\n');
    },
  };
  streams.add(stream);
  reply.hijack();
  res.writeHead(200, {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-store',
    'x-content-type-options': 'nosniff',
    'content-security-policy': CONTENT_SECURITY_POLICY,
    // Nothing follows a stream on its connection: closed with it, so a server stopping (or a
    // session ending) does not wait for a client that went quiet to close an idle connection.
    connection: 'close',
  });
  let last = '';
  let lastWrite = clock.now();
  let lastTick = 0;
  let ticking = false;
  // A wake heard while a tick reads: the read may predate the new work, so look once more.
  let missed = false;
  let still: Produced['still'];
  let unhear: (() => void) | false | undefined;
  const next = (ms: number) => {
    clock.clearTimeout(timer);
    if (!closed) timer = clock.setTimeout(tick, ms);
  };
  const stop = () => {
    closed = true;
    clock.clearTimeout(timer);
    streams.delete(stream);
    if (unhear) unhear();
  };
  request.raw.on('close', stop);
  const woken = (account: string) => {
    if (closed) return;
    // Heard while a tick reads: that read may predate the new work, so look once more after it.
    if (ticking) missed = true;
    // At most one look every EVENT_INTERVAL_MS, as while the batches move.
    else if (still?.(account)) next(Math.max(0, lastTick + EVENT_INTERVAL_MS - clock.now()));
  };
  // The process shares one subscription. Not awaited: a Redis that is away holds a subscription,
  // and the page still gets its ticks (looking every EVENT_INTERVAL_MS until it listens).
  void spec.wakes.hear(woken).then((u) => {
    unhear = u;
    if (closed && u) u();
  });
  const tick = async () => {
    // Only a look that began listening can wait for new work: one before may predate it unheard.
    const listening = unhear !== undefined && unhear !== false;
    ticking = true;
    missed = false;
    lastTick = clock.now();
    let produced: Produced | undefined;
    try {
      // The session first: a signed-out or revoked session gets nothing more, not even this tick.
      if (!(await alive())) {
        request.log.info('console live updates ended: the session is gone');
        stream.end();
        return;
      }
      produced = await produce();
      if (closed) return;
      const { data } = produced;
      if (data !== last) {
        res.write(`event: ${name}\ndata: ${data}\n\n`);
        last = data;
        lastWrite = clock.now();
      } else if (clock.now() - lastWrite >= HEARTBEAT_MS) {
        res.write(': still here\n\n');
        lastWrite = clock.now();
      }
    } catch (err) {
      // Redis away for a moment: the page keeps its last numbers; the next tick tries again.
      request.log.warn({ err: (err as Error).message }, 'console live update failed');
    } finally {
      ticking = false;
    }
    const wasStill = still !== undefined;
    still = listening ? produced?.still : undefined;
    if (still === undefined) return next(EVENT_INTERVAL_MS);
    if (!wasStill) request.log.debug('console live updates: every batch shown is finished; waiting for new work');
    next(missed ? EVENT_INTERVAL_MS : spec.idleMs);
  };
  await tick();
}

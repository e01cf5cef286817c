// The naive peer: bulk look-ups as a user would script them without vqb, written the way the
// usual snippets go. A pool of `concurrency` async loops takes plates from a list; every request
// first takes a slot from a fixed-window cap (`intervalCap` per `intervalMs`, the window opening at
// its first request, like p-queue's interval/intervalCap); a plate is created, then polled every
// `pollMs`; a 429 sleeps `Retry-After` seconds and tries again. No Redis, no shared state, the
// same undici the product uses, against the same simulator.
//
// Run as a child of the bench (forked, JSON over IPC): {type:'start', options} starts it,
// {type:'report'} answers {type:'progress'}, and {type:'done'} is sent once every plate finished.
import { pathToFileURL } from 'node:url';
import { Agent, request } from 'undici';
import { plateAt, sleep } from './common.js';

export interface PeerOptions {
  baseUrl: string;
  apiKey: string;
  product: string;
  /** Plates plateAt(platesFrom) … plateAt(platesFrom + plateCount - 1). */
  platesFrom: number;
  plateCount: number;
  intervalCap: number;
  intervalMs: number;
  concurrency: number;
  pollMs: number;
}

export interface PeerProgress {
  type: 'progress' | 'done';
  finished: number;
  failed: number;
  creates: number;
  polls: number;
  rateLimited: number;
  startedAt: number;
  lastFinishedAt: number | null;
}

/** A fixed window: at most `cap` takes per `intervalMs`, counted from the window's first take. */
class IntervalCap {
  #windowStart = 0;
  #count = 0;

  constructor(
    readonly cap: number,
    readonly intervalMs: number,
  ) {}

  async take(): Promise<void> {
    for (;;) {
      const now = Date.now();
      if (now - this.#windowStart >= this.intervalMs) {
        this.#windowStart = now;
        this.#count = 0;
      }
      if (this.#count < this.cap) {
        this.#count += 1;
        return;
      }
      await sleep(this.#windowStart + this.intervalMs - now);
    }
  }
}

const TERMINAL = new Set(['COMPLETED', 'FAILED']);

export function runPeer(options: PeerOptions, progress: PeerProgress): Promise<void> {
  const agent = new Agent({ keepAliveTimeout: 10_000 });
  const cap = new IntervalCap(options.intervalCap, options.intervalMs);

  async function call(
    method: 'GET' | 'POST',
    path: string,
    body?: unknown,
  ): Promise<{ status?: string; queryId?: string }> {
    for (;;) {
      await cap.take();
      const res = await request(`${options.baseUrl}${path}`, {
        method,
        dispatcher: agent,
        headers: { 'x-api-key': options.apiKey, 'content-type': 'application/json' },
        body: body === undefined ? null : JSON.stringify(body),
      });
      const json = (await res.body.json()) as { body?: { status?: string; queryId?: string } };
      if (res.statusCode === 429) {
        progress.rateLimited += 1;
        await sleep(Number(res.headers['retry-after'] ?? 1) * 1000);
        continue;
      }
      if (res.statusCode >= 400) throw new Error(`${method} ${path}: ${res.statusCode}`);
      return json.body ?? {};
    }
  }

  async function lookup(plate: string): Promise<void> {
    const created = await call('POST', `/queries/integration/${options.product}`, { keys: { licensePlate: plate } });
    progress.creates += 1;
    let status = created.status ?? '';
    while (!TERMINAL.has(status)) {
      await sleep(options.pollMs);
      const got = await call('GET', `/queries/integration/${encodeURIComponent(created.queryId ?? '')}`);
      progress.polls += 1;
      status = got.status ?? '';
    }
    if (status === 'COMPLETED') progress.finished += 1;
    else progress.failed += 1;
    progress.lastFinishedAt = Date.now();
  }

  let next = 0;
  const loop = async () => {
    while (next < options.plateCount) {
      const plate = plateAt(options.platesFrom + next++);
      try {
        await lookup(plate);
      } catch {
        progress.failed += 1;
        progress.lastFinishedAt = Date.now();
      }
    }
  };
  return Promise.all(Array.from({ length: options.concurrency }, loop)).then(() => agent.close());
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href && process.send) {
  const progress: PeerProgress = {
    type: 'progress',
    finished: 0,
    failed: 0,
    creates: 0,
    polls: 0,
    rateLimited: 0,
    startedAt: 0,
    lastFinishedAt: null,
  };
  process.on('message', (msg: { type: string; options?: PeerOptions }) => {
    if (msg.type === 'report') process.send!({ ...progress, type: 'progress' });
    if (msg.type === 'start' && msg.options) {
      progress.startedAt = Date.now();
      runPeer(msg.options, progress).then(
        () => process.send!({ ...progress, type: 'done' }),
        (err: unknown) => process.send!({ type: 'error', message: String((err as Error).stack ?? err) }),
      );
    }
  });
  process.once('SIGTERM', () => process.exit(0));
  process.once('disconnect', () => process.exit(0)); // the bench died: do not linger
}

// "BullMQ by hand": the queue an engineer would write in a day on open-source BullMQ, the peer
// vqb's Redis and CPU cost per plate is read against (issue 21). One queue, one job per plate
// (added with addBulk by the bench, not here), one Worker with BullMQ's own limiter set to the
// key's limit. The processor sends the create (POST, `x-api-key`), keeps the queryId in the job's
// data, and waits between polls by moving the job to delayed (`moveToDelayed` + DelayedError), so
// no worker slot is held while the upstream works; a finished query's body is the job's return
// value (stored by BullMQ with the completion). A 429 uses BullMQ's documented pattern:
// `worker.rateLimit(Retry-After)` and `throw Worker.RateLimitError()` (the job goes back to wait).
//
// Run as a child of the bench (forked, JSON over IPC) so its CPU is its own: {type:'init', options}
// builds the Worker without running it and answers {type:'ready'}; {type:'start'} runs it;
// {type:'report'} answers {type:'progress'}; {type:'done'} is sent once `plates` jobs finished.
import { pathToFileURL } from 'node:url';
import { DelayedError, type Job, Worker } from 'bullmq';
import { Agent, request } from 'undici';

export interface BullmqPeerOptions {
  redisUrl: string;
  prefix: string;
  queueName: string;
  baseUrl: string;
  apiKey: string;
  product: string;
  /** BullMQ's limiter: at most `max` jobs started per `durationMs` (the key's limit). */
  limiter: { max: number; durationMs: number };
  concurrency: number;
  /** Delay before each poll (the job waits in delayed meanwhile). */
  pollMs: number;
  /** Jobs to finish before {type:'done'} is sent. */
  plates: number;
}

export interface BullmqPeerProgress {
  type: 'progress' | 'done';
  completed: number;
  failed: number;
  creates: number;
  polls: number;
  rateLimited: number;
  startedAt: number;
  lastFinishedAt: number | null;
}

/** The job's data: the plate, and the queryId once the create answered. */
export interface PeerJobData {
  plate: string;
  queryId?: string;
}

const TERMINAL = new Set(['COMPLETED', 'FAILED']);

/** The envelope's `body` (`{statusCode, body}`) when there is one, else the object itself. */
function unwrap(json: unknown): Record<string, unknown> {
  const value = (json ?? {}) as Record<string, unknown>;
  const inner = value.body;
  return typeof inner === 'object' && inner !== null && typeof value.statusCode === 'number'
    ? (inner as Record<string, unknown>)
    : value;
}

export function createBullmqPeer(options: BullmqPeerOptions, progress: BullmqPeerProgress): Worker<PeerJobData> {
  const agent = new Agent({ keepAliveTimeout: 10_000 });
  const url = new URL(options.redisUrl);

  async function call(method: 'GET' | 'POST', path: string, body?: unknown) {
    const res = await request(`${options.baseUrl}${path}`, {
      method,
      dispatcher: agent,
      headers: { 'x-api-key': options.apiKey, 'content-type': 'application/json' },
      body: body === undefined ? null : JSON.stringify(body),
    });
    const json = await res.body.json().catch(() => undefined);
    return { status: res.statusCode, retryAfter: res.headers['retry-after'], body: unwrap(json) };
  }

  const processor = async (job: Job<PeerJobData>, token?: string): Promise<unknown> => {
    const { plate, queryId } = job.data;
    const answer = queryId
      ? await call('GET', `/queries/integration/${encodeURIComponent(queryId)}`)
      : await call('POST', `/queries/integration/${options.product}`, { keys: { licensePlate: plate } });
    if (answer.status === 429) {
      progress.rateLimited += 1;
      await worker.rateLimit(Number(answer.retryAfter ?? 1) * 1000);
      throw Worker.RateLimitError();
    }
    if (answer.status >= 400) throw new Error(`${queryId ? 'GET' : 'POST'}: upstream answered ${answer.status}`);
    if (queryId) progress.polls += 1;
    else progress.creates += 1;
    const status = String(answer.body.status ?? '');
    if (TERMINAL.has(status)) return answer.body;
    if (!queryId) {
      const id = answer.body.queryId ?? answer.body.id;
      if (typeof id !== 'string') throw new Error('create answered without a queryId');
      await job.updateData({ plate, queryId: id });
    }
    await job.moveToDelayed(Date.now() + options.pollMs, token);
    throw new DelayedError();
  };

  const worker: Worker<PeerJobData> = new Worker<PeerJobData>(options.queueName, processor, {
    connection: { host: url.hostname, port: Number(url.port || 6379), maxRetriesPerRequest: null },
    prefix: options.prefix,
    concurrency: options.concurrency,
    limiter: { max: options.limiter.max, duration: options.limiter.durationMs },
    autorun: false,
  });
  const finished = () => {
    progress.lastFinishedAt = Date.now();
    if (progress.completed + progress.failed >= options.plates && process.send)
      process.send({ ...progress, type: 'done' });
  };
  worker.on('completed', () => {
    progress.completed += 1;
    finished();
  });
  worker.on('failed', () => {
    progress.failed += 1;
    finished();
  });
  worker.on('closed', () => void agent.close());
  return worker;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href && process.send) {
  const progress: BullmqPeerProgress = {
    type: 'progress',
    completed: 0,
    failed: 0,
    creates: 0,
    polls: 0,
    rateLimited: 0,
    startedAt: 0,
    lastFinishedAt: null,
  };
  let worker: Worker<PeerJobData> | undefined;
  const fail = (err: unknown) => process.send!({ type: 'error', message: String((err as Error).stack ?? err) });
  process.on('message', (msg: { type: string; options?: BullmqPeerOptions }) => {
    if (msg.type === 'report') process.send!({ ...progress, type: 'progress' });
    if (msg.type === 'init' && msg.options) {
      worker = createBullmqPeer(msg.options, progress);
      worker.on('error', fail);
      worker.waitUntilReady().then(() => process.send!({ type: 'ready' }), fail);
    }
    if (msg.type === 'start' && worker) {
      progress.startedAt = Date.now();
      worker.run().catch(fail);
    }
  });
  const stop = () => {
    const exit = () => process.exit(0);
    setTimeout(exit, 5_000).unref();
    void (worker?.close() ?? Promise.resolve()).then(exit, exit);
  };
  process.once('SIGTERM', stop);
  process.once('disconnect', stop); // the bench died: do not linger
}

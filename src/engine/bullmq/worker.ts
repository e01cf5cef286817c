// What vqb does to BullMQ's Worker beyond its public options: the Worker's wait for work, and a
// nudge to its main loop. Named here and nowhere else in src/ (issue 45); the contract test
// (test/integration/bullmq-contract.test.ts) checks the installed BullMQ still has each, and
// docs/development.md#bullmq-internals says what BullMQ would need to make them public.
import { type BackendFactory, createRedisBackend, type RedisQueueBackend, type Worker } from 'bullmq';

/** What a Worker's wait for work is made of, in place of BullMQ's blocking BZPOPMIN. */
export interface WaitHooks {
  /** Nothing to fetch: resolves when the Worker should look again, `ms` at the latest. */
  wait(ms: number): Promise<void>;
  /** BullMQ ends the wait (the Worker stops or pauses). */
  interrupt(): void;
  /** A job of the queue was delayed until `at`, epoch ms (a poll's wait, a retry's backoff). */
  delayed(at: number): void;
  /** The backend closes with its Worker: the wait ends and its hooks are forgotten. */
  closed(): void;
}

/**
 * The backend methods replaced on BullMQ's own Redis backend: each a method of BullMQ's public
 * IQueueBackend interface, replaced on the instance since createRedisBackend builds a class whose
 * constructor needs BullMQ's private connection and key classes.
 */
export const REPLACED_BACKEND_METHODS = [
  'waitForJob',
  'disconnectBlocking',
  'reconnectBlocking',
  'moveToDelayed',
  'close',
] as const satisfies readonly (keyof RedisQueueBackend)[];

/**
 * BullMQ's Redis backend on the connection the Worker is given (shared, not duplicated) with no
 * blocking connection: the Worker waits on `hooks()` (made once per backend) instead of Redis.
 */
export function quietBackend(hooks: () => WaitHooks): BackendFactory<RedisQueueBackend> {
  return (name, opts) => {
    const backend = createRedisBackend(name, opts, { withBlockingConnection: false });
    const bell = hooks();
    backend.waitForJob = async (blockTimeoutS: number) => {
      await bell.wait(blockTimeoutS * 1_000);
      // No marker read: the Worker fetches (moveToActive) at once.
      return null;
    };
    backend.disconnectBlocking = async () => bell.interrupt();
    backend.reconnectBlocking = async () => {};
    const moveToDelayed = backend.moveToDelayed.bind(backend);
    backend.moveToDelayed = async (jobId, timestamp, delay, token, delayOpts) => {
      const result = await moveToDelayed(jobId, timestamp, delay, token, delayOpts);
      bell.delayed(timestamp + delay);
      return result;
    };
    const close = backend.close.bind(backend);
    backend.close = async (force?: boolean) => {
      bell.closed();
      await close(force);
    };
    return backend;
  };
}

/** The Worker's private member that wakeMainLoop reaches (BullMQ's Worker.mainLoop sets it while it runs). */
export const MAIN_LOOP_MEMBER = 'mainLoopQueue';

interface LoopQueue {
  add(promise: Promise<unknown>): void;
}

/**
 * Makes the Worker's main loop look again at once (at its concurrency, which it re-reads only when
 * something it awaits settles: a fetch, a job ending). An empty promise added to the loop's queue
 * settles at once; BullMQ's own resume does the same. False when the Worker has no running loop.
 */
export function wakeMainLoop(worker: Worker): boolean {
  const loop = (worker as unknown as Record<string, LoopQueue | null | undefined>)[MAIN_LOOP_MEMBER];
  if (!loop || typeof loop.add !== 'function') return false;
  loop.add(Promise.resolve(undefined));
  return true;
}

// Whether Redis is usable right now, as this process sees it: up, down (no connection) or full
// (it refuses writes: maxmemory reached under noeviction). Every connection and every BullMQ
// Queue/Worker reports here instead of printing its own errors, so an outage is a few JSON log
// lines, one per change of state ("redis connection lost", "redis connection back", "redis is
// full"), never one per reconnect attempt or per retried command. The workers read the state to
// say why the line waits (reason `redis_down` / `redis_full`).
//
// Connections are made in src/redis/connection.ts; whoever makes one calls `health.watch` on it.

import type { ChainableCommander } from 'ioredis';
import type { Logger } from 'pino';
import type { RedisWaitReason } from '../accounts/wait.js';
import { type Clock, clock } from '../clock.js';
import { isError, RedisFullError, RedisUnreplicatedError } from '../errors.js';
import type { RedisClient } from './connection.js';

export type RedisState = 'up' | 'down' | 'full';

function messagesOf(err: unknown): string[] {
  if (typeof err !== 'object' || err === null) return [String(err)];
  const e = err as {
    message?: unknown;
    code?: unknown;
    previousErrors?: unknown[];
    cause?: unknown;
    errors?: unknown[];
  };
  const own = [typeof e.message === 'string' ? e.message : '', typeof e.code === 'string' ? e.code : ''];
  const nested = [
    ...(e.previousErrors ?? []),
    ...(e.errors ?? []),
    ...(e.cause !== undefined && e.cause !== err ? [e.cause] : []),
  ];
  return [...own, ...nested.flatMap(messagesOf)];
}

/** Redis refused a write for lack of memory (`OOM command not allowed…`), possibly inside an aborted MULTI. */
export function isRedisFull(err: unknown): boolean {
  return messagesOf(err).some((m) => /^OOM\b|OOM command not allowed|used memory > 'maxmemory'/.test(m));
}

const DOWN = new RegExp(
  [
    ...['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENOTFOUND'],
    ...[
      'Connection is closed',
      "Stream isn't writeable",
      'MaxRetriesPerRequest',
      'Reached the max retries per request',
    ],
    ...['LOADING', 'CLUSTERDOWN', 'TRYAGAIN', 'MASTERDOWN', 'READONLY', 'NOREPLICAS'],
    // A paid write no replica holds yet (redis/replica-ack.ts): made again, like a write refused.
    'REDIS_UNREPLICATED',
    // A script's key gone to another node mid-reshard (MIGRATING below): tried again like TRYAGAIN.
    'ERR Script attempted to access a non local key',
  ].join('|'),
);

/**
 * A Cluster answer for a slot being moved (TRYAGAIN: a multi-key command whose keys are split
 * between the two nodes; ASK/MOVED left over once the client's own redirections ran out), or a
 * script that reaches keys by names it builds finding them gone to the other node (BullMQ's
 * renewal of a Worker's locks, extendLocks-1.lua: every key of vqb's shares one hash tag, so only
 * a slot on the move makes one of them "non local").
 */
const MIGRATING = /^(?:(?:TRYAGAIN|ASK|MOVED) |ERR Script attempted to access a non local key in a cluster node)/;

/**
 * A slot of vqb's is being moved between Cluster nodes: the command is to be tried again (callers
 * treat it as `isRedisDown`), but the connection is up and nothing is said unless it lasts.
 */
export function isSlotMigrating(err: unknown): boolean {
  return messagesOf(err).some((m) => MIGRATING.test(m));
}

/**
 * How long slot answers go on before they are said: a reshard moves a slot in well under a
 * second (connection.ts rides out about 20 s of it), so this is a migration left half done.
 */
export const MIGRATION_SAID_AFTER_MS = 30_000;

/** The connection to Redis failed or Redis cannot serve yet (restarting, loading its data). */
export function isRedisDown(err: unknown): boolean {
  return messagesOf(err).some((m) => DOWN.test(m));
}

/**
 * Executes a MULTI and fails if any part failed. A full Redis refuses the whole transaction at
 * EXEC (Redis checks memory before EXEC runs any of it when the block holds a write that may
 * grow memory; commands queued while full are refused and abort the EXEC): RedisFullError.
 */
export async function execAll(multi: ChainableCommander, what: string): Promise<unknown[]> {
  let replies: [Error | null, unknown][] | null;
  try {
    replies = await multi.exec();
  } catch (err) {
    if (isRedisFull(err)) throw new RedisFullError(what, err);
    throw err;
  }
  if (replies === null) throw new Error(`${what}: the transaction was aborted`);
  const failed = replies.find(([err]) => err !== null)?.[0];
  if (failed) throw isRedisFull(failed) ? new RedisFullError(what, failed) : failed;
  return replies.map(([, value]) => value);
}

/** Anything that emits 'error' (an ioredis client, a BullMQ Queue or Worker). */
interface ErrorEmitter {
  on(event: 'error', listener: (err: Error) => void): unknown;
}

/**
 * One process's view of Redis. `report` takes any error seen (an 'error' event, a failed
 * command); `ok` says a command or a connection worked again. Each change of state is logged
 * once and passed to the listeners.
 */
export class RedisHealth {
  #state: RedisState = 'up';
  #closed = false;
  readonly #log: Logger;
  readonly #listeners = new Set<(state: RedisState) => void>();
  /** Errors of other kinds, logged once per distinct message until Redis changes state. */
  readonly #seen = new Set<string>();
  readonly #clock: Clock;
  /** The slot answers now going on: since when, the last one, whether it was said. */
  #migrating: { since: number; last: number; said: boolean } | undefined;

  constructor(log: Logger, clk: Clock = clock) {
    this.#log = log;
    this.#clock = clk;
  }

  get state(): RedisState {
    return this.#state;
  }

  /** `redis_down` / `redis_full` while Redis stops the work, else undefined. */
  get waitReason(): RedisWaitReason | undefined {
    return this.#state === 'down' ? 'redis_down' : this.#state === 'full' ? 'redis_full' : undefined;
  }

  onState(listener: (state: RedisState) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /**
   * True when the error was Redis being down or full (then it is logged at most once per change).
   * Other errors are left to the caller, unlogged: for callers that log them in their own words.
   */
  outage(err: unknown): boolean {
    if (isSlotMigrating(err)) {
      this.#slotMoving(err);
      return true;
    }
    if (isRedisFull(err)) {
      this.#set('full', err);
      return true;
    }
    if (isRedisDown(err)) {
      this.#set('down', err);
      return true;
    }
    return false;
  }

  /**
   * As `outage`, and any other error is logged too ('redis client error', once per distinct
   * message until Redis changes state).
   */
  report(err: unknown, source?: string): boolean {
    if (this.#closed) return true;
    if (this.outage(err)) return true;
    const message = (err as Error | undefined)?.message ?? String(err);
    if (!this.#seen.has(message)) {
      this.#seen.add(message);
      this.#log.error({ err, ...(source ? { source } : {}) }, 'redis client error');
    }
    return false;
  }

  ok(): void {
    this.#set('up');
  }

  /**
   * A slot answer: Redis is up (a "connection lost" line would send the operator the wrong way; a
   * Cluster test read one mid-reshard). Answers that go on past MIGRATION_SAID_AFTER_MS, with no
   * quiet gap that long between two, are one warning naming the fix.
   */
  #slotMoving(err: unknown): void {
    const now = this.#clock.monotonic();
    const m = this.#migrating;
    if (m === undefined || now - m.last > MIGRATION_SAID_AFTER_MS) {
      this.#migrating = { since: now, last: now, said: false };
      return;
    }
    m.last = now;
    if (m.said || now - m.since < MIGRATION_SAID_AFTER_MS) return;
    m.said = true;
    this.#log.warn(
      {
        redis: 'migrating',
        seconds: Math.round((now - m.since) / 1000),
        reason: messagesOf(err).find((x) => MIGRATING.test(x)),
      },
      "a Redis Cluster slot of vqb's has been half moved for a while: commands on it are retried; " +
        'finish or roll back the reshard (redis-cli --cluster fix)',
    );
  }

  /**
   * The process is done with Redis (its connections are closed on purpose): what their closing
   * emits is not an outage, and nothing more is said (`vqb work` once logged "redis connection
   * lost" after "worker stopped").
   */
  close(): void {
    this.#closed = true;
  }

  #set(state: RedisState, err?: unknown): void {
    if (this.#closed || state === this.#state) return;
    const was = this.#state;
    this.#state = state;
    this.#seen.clear();
    const detail = err === undefined ? {} : { reason: messagesOf(err).find((m) => m !== '') ?? String(err) };
    if (state === 'down' && isError(err, RedisUnreplicatedError))
      this.#log.warn(
        { redis: state, code: err.code, ...detail },
        'no redis replica confirms paid writes: they are held and written again until one does ' +
          '(bring the replica back, or VQ_REDIS_REPLICA_ACKS=0 for a primary without one)',
      );
    else if (state === 'down')
      this.#log.warn(
        { redis: state, ...detail },
        'redis connection lost; retrying in the background, paid results are kept until they are stored',
      );
    else if (state === 'full') {
      this.#log.error(
        { redis: state, ...detail },
        'redis is full (maxmemory reached): writes are refused; raise maxmemory or free memory, work resumes by itself',
      );
    } else this.#log.info({ redis: state, was }, 'redis connection back');
    for (const listener of this.#listeners) listener(state);
  }

  /** Routes an emitter's 'error' events here (BullMQ prints them to stderr when nothing listens). */
  quiet(emitter: ErrorEmitter, source: string): void {
    emitter.on('error', (err) => {
      this.report(err, source);
    });
  }

  /**
   * A Redis that stops answering (paused, a blackholed link) sends no error and closes nothing: its
   * commands just hang. One PING every `everyMs`, unanswered for `timeoutMs`, is an outage (one
   * line, like any other); the next answer is the way back. Returns the stop function.
   */
  heartbeat(redis: RedisClient, everyMs = 2_000, timeoutMs = 5_000): () => void {
    let pending = false;
    let since = 0;
    const timer = this.#clock.setInterval(() => {
      if (pending) {
        if (this.#clock.now() - since > timeoutMs && this.#state === 'up')
          this.#set(
            'down',
            new Error(`redis is not answering (no reply to PING for ${Math.round(timeoutMs / 1000)} s)`),
          );
        return;
      }
      pending = true;
      since = this.#clock.now();
      redis.ping().then(
        () => {
          pending = false;
          if (this.#state === 'down') this.ok();
        },
        () => {
          pending = false;
        },
      );
    }, everyMs);
    timer.unref();
    return () => this.#clock.clearTimeout(timer);
  }

  /** Follows a connection: its errors and closes mean down, `ready` means back. */
  watch(redis: RedisClient): () => void {
    const onError = (err: Error) => this.report(err, 'connection');
    const onReady = () => this.ok();
    const onClose = () => {
      if (this.#state === 'up' && redis.status !== 'end') this.#set('down', new Error('Connection is closed'));
    };
    redis.on('error', onError);
    redis.on('ready', onReady);
    redis.on('close', onClose);
    return () => {
      redis.off('error', onError);
      redis.off('ready', onReady);
      redis.off('close', onClose);
    };
  }
}

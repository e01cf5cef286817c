// A wait that is a message, not a loop asking Redis again (a wait is an event): a connection of
// its own subscribed to one channel, and `next` resolves at the next matching message (one heard
// since the last call counts) or after `ms`, whichever comes first. The timer is the fallback for
// what no message announces (a lock's expiry) and for a message lost to a reconnect. Used while
// someone waits on something rare or long (an ingest lock, a batch's finish), so the connection is
// opened for the wait and closed after it.
import type { Clock } from '../clock.js';
import { duplicateOf, type RedisClient } from './connection.js';

export interface Heard {
  /** Resolves at a message heard since the last call, after `ms`, or when `signal` aborts. */
  next(ms: number, signal?: AbortSignal): Promise<void>;
  close(): void;
}

/**
 * Subscribes `subscriber` (a connection of its own: a subscribed connection takes no other
 * command) to `channel` for as long as it lives, and says whether what is published there is
 * heard: `onStanding(true)` at each confirmation of the subscription (the first, and again after
 * each reconnect's: ioredis subscribes again on its own, this call's reply confirms it),
 * `onStanding(false)` when the connection closes (what is published meanwhile is lost). Resolves
 * at the first confirmation; a failed first subscription reaches the caller.
 */
export async function keepSubscribed(
  subscriber: RedisClient,
  channel: string,
  onStanding: (standing: boolean) => void,
): Promise<void> {
  let standing = false;
  const stands = () => {
    if (standing) return;
    standing = true;
    onStanding(true);
  };
  subscriber.on('close', () => {
    if (!standing) return;
    standing = false;
    onStanding(false);
  });
  subscriber.on('ready', () => {
    if (standing) return;
    subscriber.subscribe(channel).then(stands, () => undefined);
  });
  await subscriber.subscribe(channel);
  stands();
}

/** Subscribes to `channel` (resolves once subscribed: a message published after that is heard). */
export async function hear(
  redis: RedisClient,
  channel: string,
  time: Pick<Clock, 'sleep'>,
  matches: (message: string) => boolean = () => true,
): Promise<Heard> {
  // A failed subscription reaches the caller; a later cut only loses a message (the timer remains).
  const subscriber = duplicateOf(redis);
  let heard = false;
  let wake: (() => void) | undefined;
  subscriber.on('message', (from: string, message: string) => {
    if (from !== channel || !matches(message)) return;
    heard = true;
    wake?.();
  });
  try {
    await subscriber.subscribe(channel);
  } catch (err) {
    subscriber.disconnect();
    throw err;
  }
  return {
    async next(ms, signal) {
      if (!heard && !signal?.aborted) {
        const woken = new AbortController();
        wake = () => woken.abort();
        const either = signal ? AbortSignal.any([woken.signal, signal]) : woken.signal;
        await time.sleep(ms, either).catch(() => undefined);
        wake = undefined;
      }
      heard = false;
    },
    close: () => subscriber.disconnect(),
  };
}

/**
 * Takes a lock (`SET key token PX ms NX`) once it is free, waiting for its release as a message:
 * the holder releases it with lock-release-1.lua given `released.channel`. The only timer is the
 * lock's expiry (a holder that died) or `waitMs`. `onWait` is told once, at the first refusal, how
 * long the lock has left; `moot`, asked after each wake, ends the wait when what the lock guards
 * was done meanwhile (another process's work made this one's unnecessary).
 */
export async function lockWhenFree(
  redis: RedisClient,
  lock: { key: string; token: string; ms: number },
  released: { channel: string; matches?: (message: string) => boolean },
  time: Pick<Clock, 'now' | 'sleep'>,
  options: { waitMs?: number; onWait?: (leftMs: number) => void; moot?: () => Promise<boolean> } = {},
): Promise<'taken' | 'moot' | 'timeout'> {
  const deadline = time.now() + (options.waitMs ?? Number.POSITIVE_INFINITY);
  let told = false;
  let unlocks: Heard | undefined;
  try {
    for (;;) {
      if ((await redis.set(lock.key, lock.token, 'PX', lock.ms, 'NX')) === 'OK') return 'taken';
      const ttl = await redis.pttl(lock.key);
      // -2: released meanwhile (try again now); -1 (no expiry) is not a lock this code set.
      const left = ttl === -2 ? 0 : ttl < 0 ? lock.ms : ttl;
      if (!told) {
        told = true;
        options.onWait?.(left);
      }
      if (time.now() > deadline) return 'timeout';
      if (unlocks === undefined) {
        // Listening from now: a release before the subscription is seen by the next SET.
        unlocks = await hear(redis, released.channel, time, released.matches);
        continue;
      }
      await unlocks.next(Math.min(left, deadline - time.now() + 1));
      if (await options.moot?.()) return 'moot';
    }
  } finally {
    unlocks?.close();
  }
}

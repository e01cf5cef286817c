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

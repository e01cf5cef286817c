// News of the accounts' holds, pushed to the worker processes (issue 43: a worker's CPU a plate
// is mostly its round trips to Redis).
//
// A request that slept for its slot asks, right before it leaves, whether a hold started
// meanwhile (a 429 another request drew): one script call a poll (pace-held) for news that is
// almost always "none". Whoever sets or lengthens a hold (lua/pace-hold-2.lua) publishes it on
// the channel G:holds as "<account> <ms>", and whoever lifts one (queue/line.ts releaseHold)
// publishes "<account> 0"; each worker process listens here and answers the question from memory.
//
// News can be lost (a connection cut, a reconnect), so the answer is given only while the
// subscription is known to be in place: from its confirmation until the connection next closes.
// Otherwise `heldFor` says undefined and the request asks Redis as before. What a lost message
// could still let through is a request whose slot was reserved before the hold began: the pace
// refuses every new slot while a hold is in force (lua/includes/pace-take.lua), with or without
// news.

import { type Clock, clock as systemClock } from '../clock.js';
import type { RedisClient } from '../redis/connection.js';
import { keepSubscribed } from '../redis/heard.js';
import type { VqbKeys } from '../redis/keys.js';

/** The channel the holds are published on (queue/line.ts publishes, through here). */
export function holdChannel(keys: VqbKeys): string {
  return keys.holds;
}

/** The message a hold of `ms` (0: lifted) of `accountId` is published as. */
export function holdMessage(accountId: string, ms: number): string {
  return `${accountId} ${Math.max(0, Math.round(ms))}`;
}

/** The account and ms of a message, or undefined for one that is not ours. */
export function readHoldMessage(message: string): { accountId: string; ms: number } | undefined {
  const [accountId, ms, extra] = message.split(' ');
  const n = Number(ms);
  if (!accountId || extra !== undefined || ms === undefined || ms === '' || !Number.isFinite(n) || n < 0)
    return undefined;
  return { accountId, ms: n };
}

export class HoldNews {
  readonly #clock: Pick<Clock, 'monotonic'>;
  /** account → when its hold ends (clock.monotonic()), as last published. */
  readonly #ends = new Map<string, number>();
  #live = false;

  constructor(clock: Pick<Clock, 'monotonic'> = systemClock) {
    this.#clock = clock;
  }

  /**
   * Listens on the holds' channel with `subscriber` (a connection that takes no other command).
   * The news counts from the subscription's confirmation, and again after each reconnect's.
   */
  async listen(subscriber: RedisClient, keys: VqbKeys): Promise<void> {
    const channel = holdChannel(keys);
    subscriber.on('message', (from: string, message: string) => {
      if (from !== channel) return;
      const news = readHoldMessage(message);
      if (news === undefined) return;
      if (news.ms === 0) this.#ends.delete(news.accountId);
      else this.#ends.set(news.accountId, this.#clock.monotonic() + news.ms);
    });
    // What was published while the connection was down is lost: no answers until subscribed again.
    await keepSubscribed(subscriber, channel, (standing) => {
      if (standing) this.#confirmed();
      else this.#live = false;
    });
  }

  #confirmed(): void {
    // Once per subscription: a second confirmation of the same one (the first start's 'ready'
    // and its own call) must not forget a hold heard in between.
    if (this.#live) return;
    // Holds heard before a cut may have been lifted or lengthened meanwhile: forget them; a hold
    // in force still refuses every new slot (see the top of this file).
    this.#ends.clear();
    this.#live = true;
  }

  /** Whether the news is complete now (subscribed, and not cut since). */
  get live(): boolean {
    return this.#live;
  }

  /** Ms left of the account's hold as published (0: none), or undefined when the news may be incomplete. */
  heldFor(accountId: string): number | undefined {
    if (!this.#live) return undefined;
    const end = this.#ends.get(accountId);
    if (end === undefined) return 0;
    const left = end - this.#clock.monotonic();
    if (left > 0) return left;
    this.#ends.delete(accountId);
    return 0;
  }
}

// The scheduler's active set (queue/scheduler.ts: the accounts with work) as one worker process
// knows it. Read from Redis at the first feed pass, then kept from what the process hears: a wake
// names an account that has work (a producer fed its queue, or a rerun put jobs there:
// queue/feeder.ts), and a feed that finds an account idle takes it out. Before, every feed pass
// read the set: 5 commands a second per process, idle or not.

import type { Scheduler } from '../src/queue/scheduler.js';

/**
 * How long a process goes at most without reading the set while it hears wakes: a bound on a wake
 * lost some other way than a closed connection (a cut is seen: every pass reads the set until the
 * subscription stands again, and once more then).
 */
export const ACTIVE_READ_EVERY_MS = 10_000;

export class KnownActive {
  readonly #scheduler: Pick<Scheduler, 'activeAccounts'>;
  /** The accounts this process serves: another process's configuration may name others. */
  readonly #served: ReadonlySet<string>;
  readonly #readEveryMs: number;
  #known: Set<string> | undefined;
  #readAt = Number.NEGATIVE_INFINITY;
  #listening = false;
  /** Wakes heard while a read was out: newer than what it returns. */
  #during: Set<string> | undefined;

  constructor(
    scheduler: Pick<Scheduler, 'activeAccounts'>,
    served: ReadonlySet<string>,
    readEveryMs = ACTIVE_READ_EVERY_MS,
  ) {
    this.#scheduler = scheduler;
    this.#served = served;
    this.#readEveryMs = readEveryMs;
  }

  /** The accounts with work at `at` (the process's clock): read when due, else as heard. */
  async accounts(at: number): Promise<string[]> {
    if (this.#known === undefined || !this.#listening || at - this.#readAt >= this.#readEveryMs) {
      this.#during = new Set();
      try {
        const read = (await this.#scheduler.activeAccounts()).filter((id) => this.#served.has(id));
        this.#known = new Set([...read, ...this.#during]);
        this.#readAt = at;
      } finally {
        this.#during = undefined;
      }
    }
    return [...this.#known];
  }

  /** A wake named the account: it has work. */
  heard(accountId: string): void {
    if (!this.#served.has(accountId)) return;
    this.#known?.add(accountId);
    this.#during?.add(accountId);
  }

  /** A feed found the account idle (it left the set), and no wake came while that feed was out. */
  left(accountId: string): void {
    this.#known?.delete(accountId);
  }

  /**
   * The wake subscription stands (at start, or again after a cut): the set is read once more at
   * the next pass, since a wake published before the subscription was confirmed is not heard,
   * then only every `readEveryMs`.
   */
  listening(): void {
    this.#listening = true;
    this.#readAt = Number.NEGATIVE_INFINITY;
  }

  /** The wake connection closed: wakes may be lost, so every pass reads the set until it stands again. */
  deaf(): void {
    this.#listening = false;
  }
}

// Every configured account in one record, built once from the config (src/services.ts) and handed
// down: its settings and key source (Account), its BullMQ queue, and its line (pace, holds, pauses,
// and the rate in force). Which account an id names is decided by accountOf; nothing else keeps a
// map of accounts.

import { type Account, accountOf } from '../accounts/account.js';
import { clock } from '../clock.js';
import type { Config } from '../config.js';
import type { RedisClient } from '../redis/connection.js';
import type { VqbKeys } from '../redis/keys.js';
import { openAccountQueue, type PlateQueue } from './account-queues.js';
import { AccountLine, type AccountLineState } from './line.js';

/** One configured account: what it is, and the queue and line every part of vqb reaches it by. */
export interface AccountRecord {
  readonly id: string;
  /** Settings and key source, as configured. */
  readonly account: Account;
  readonly queue: PlateQueue;
  /** Its line in Redis: pauses, holds, pace, and the rate in force (`line.rate()`). */
  readonly line: AccountLine;
}

export class Accounts {
  /** The configured accounts, in the configured order (the first is the one used when none is named). */
  readonly accounts: readonly Account[];
  readonly #records = new Map<string, AccountRecord>();

  constructor(
    config: Pick<
      Config,
      'accounts' | 'queueName' | 'prefix' | 'attempts' | 'backoffMs' | 'keepFailedMs' | 'pacingJitterMs'
    >,
    redis: RedisClient,
    keys: VqbKeys,
    now: () => number = clock.now,
  ) {
    this.accounts = config.accounts;
    for (const account of config.accounts) {
      const queue = openAccountQueue(config, account.id, redis);
      const line = new AccountLine(account, queue, redis, keys, config.pacingJitterMs, now);
      this.#records.set(account.id, { id: account.id, account, queue, line });
    }
  }

  /** The account `accountId` names, or the first configured when none is; an unknown id is ACCOUNT_NOT_FOUND. */
  for(accountId: string | undefined): AccountRecord {
    return this.#records.get(accountOf(this, accountId).id)!;
  }

  line(accountId: string | undefined): AccountLine {
    return this.for(accountId).line;
  }

  queue(accountId: string | undefined): PlateQueue {
    return this.for(accountId).queue;
  }

  all(): AccountRecord[] {
    return [...this.#records.values()];
  }

  /** The accounts named, or all of them when none is. */
  pick(accountId?: string): AccountRecord[] {
    return accountId === undefined ? this.all() : [this.for(accountId)];
  }

  queues(): PlateQueue[] {
    return this.all().map((a) => a.queue);
  }

  states(): Promise<AccountLineState[]> {
    return Promise.all(this.all().map((a) => a.line.state()));
  }

  /** Job counts summed over every account's queue. */
  async counts(...types: string[]): Promise<Record<string, number>> {
    const sum: Record<string, number> = {};
    for (const queue of this.queues()) {
      for (const [state, n] of Object.entries(await queue.getJobCounts(...(types as never[]))))
        sum[state] = (sum[state] ?? 0) + n;
    }
    return sum;
  }

  async close(): Promise<void> {
    await Promise.all(this.queues().map((q) => q.close()));
  }
}

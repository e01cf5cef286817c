// Spending caps: per batch (max creates) and per account per UTC day and month. A create reserves
// one unit of every cap in one Lua step before it is sent, and gives it back when the create
// certainly did not happen, so a cap of N stops creates at exactly N. Reaching a cap never fails a
// plate: the plate waits and goes on when the cap is raised or resets. This module alone reads
// and writes the spend counters, the run-time caps and each batch's budget hash.

import type { Account } from '../accounts/account.js';
import { clock } from '../clock.js';
import type { RedisClient } from '../redis/connection.js';
import type { BatchRef, VqbKeys } from '../redis/keys.js';
import { type Scripted, withScripts } from '../redis/scripts.js';
import { nextUtcDay, nextUtcMonth, utcDay, utcMonth } from './costs.js';

export type BudgetVerdict = 'ok' | 'batch' | 'day' | 'month';

export interface Caps {
  perDay: number | undefined;
  perMonth: number | undefined;
}

const SCRIPTS = ['budget-reserve', 'budget-refund'] as const;

export class Budget {
  readonly #redis: Scripted<(typeof SCRIPTS)[number]>;
  readonly #keys: VqbKeys;
  readonly #accounts: ReadonlyMap<string, Account>;
  readonly #now: () => number;

  constructor(redis: RedisClient, keys: VqbKeys, accounts: readonly Account[], now: () => number = clock.now) {
    this.#redis = withScripts(redis, SCRIPTS);
    this.#keys = keys;
    this.#accounts = new Map(accounts.map((a) => [a.id, a]));
    this.#now = now;
  }

  /**
   * The account's caps: set at run time (`vqb budget`) over the configured ones. Read at every
   * reservation, not cached: a create woken because a cap was raised must see the raise, or it
   * would be held again until the next reset.
   */
  async caps(accountId: string): Promise<Caps> {
    const fields = await this.#redis.hgetall(this.#keys.budget(accountId));
    const configured = this.#accounts.get(accountId);
    const pick = (stored: string | undefined, value: number | undefined) =>
      stored === undefined ? value : stored === '' ? undefined : Number(stored);
    return { perDay: pick(fields.perDay, configured?.perDay), perMonth: pick(fields.perMonth, configured?.perMonth) };
  }

  /** Run-time caps of an account; `null` removes a cap, `undefined` leaves it as it is. */
  async setCaps(accountId: string, caps: { perDay?: number | null; perMonth?: number | null }): Promise<void> {
    for (const [field, value] of Object.entries(caps)) {
      if (value !== undefined)
        await this.#redis.hset(this.#keys.budget(accountId), field, value === null ? '' : String(value));
    }
  }

  async reserve(accountId: string, batchId: string, home = accountId): Promise<BudgetVerdict> {
    const { keys, args } = this.terms(accountId, batchId, home);
    return (await this.#redis.vqbBudgetReserve(...keys, ...args)) as BudgetVerdict;
  }

  /**
   * What the caps' rule (lua/includes/budget-take.lua) needs for one create of the batch: the
   * keys and the configured caps (the run-time ones are read in the script). For budget-reserve
   * and for the create's one admission script (queue/admission.ts). `home`: where the batch lives
   * (a pooled batch's plate spends the day and month caps of the key that creates it, `accountId`,
   * and the cap of its batch, kept at its home).
   */
  terms(accountId: string, batchId: string, home = accountId): { keys: string[]; args: (string | number)[] } {
    const now = this.#now();
    const configured = this.#accounts.get(accountId);
    return {
      keys: [
        this.#keys.batchBudget({ id: batchId, account: home }),
        this.#keys.spendDay(accountId, utcDay(now)),
        this.#keys.spendMonth(accountId, utcMonth(now)),
        this.#keys.budget(accountId),
      ],
      args: [configured?.perDay ?? -1, configured?.perMonth ?? -1, 3 * 86_400, 40 * 86_400],
    };
  }

  async refund(accountId: string, batchId: string, home = accountId): Promise<void> {
    const now = this.#now();
    await this.#redis.vqbBudgetRefund(
      this.#keys.batchBudget({ id: batchId, account: home }),
      this.#keys.spendDay(accountId, utcDay(now)),
      this.#keys.spendMonth(accountId, utcMonth(now)),
    );
  }

  /** When an account cap that was reached frees up again. */
  resetsAt(verdict: 'day' | 'month'): number {
    return verdict === 'day' ? nextUtcDay(this.#now()) : nextUtcMonth(this.#now());
  }

  async spent(accountId: string): Promise<{ today: number; thisMonth: number }> {
    const now = this.#now();
    const [d, m] = await this.#redis.mget(
      this.#keys.spendDay(accountId, utcDay(now)),
      this.#keys.spendMonth(accountId, utcMonth(now)),
    );
    return { today: Number(d ?? 0), thisMonth: Number(m ?? 0) };
  }

  /** A batch's create cap (undefined: none) and whether it is held at it. */
  async forBatch(batch: BatchRef): Promise<{ maxCreates?: number; held: boolean }> {
    const [max, held] = await this.#redis.hmget(this.#keys.batchBudget(batch), 'max', 'held');
    return { ...(max !== null && max !== '' ? { maxCreates: Number(max) } : {}), held: held === '1' };
  }

  /** A new create cap for the batch (`null` removes it). */
  async setMaxCreates(batch: BatchRef, maxCreates: number | null): Promise<void> {
    if (maxCreates === null) await this.#redis.hdel(this.#keys.batchBudget(batch), 'max');
    else await this.#redis.hset(this.#keys.batchBudget(batch), 'max', String(maxCreates));
  }

  /** The batch reached its cap (true) or may go on (false); returns whether this call changed it. */
  async setHeld(batch: BatchRef, held: boolean): Promise<boolean> {
    const key = this.#keys.batchBudget(batch);
    return held ? (await this.#redis.hsetnx(key, 'held', '1')) === 1 : (await this.#redis.hdel(key, 'held')) === 1;
  }

  /** Deletes the batch's budget hash (retention; the account's spend counters stay). */
  async forget(batch: BatchRef): Promise<void> {
    await this.#redis.del(this.#keys.batchBudget(batch));
  }
}

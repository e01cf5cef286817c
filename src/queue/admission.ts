// A create's admission in one Redis step: the account's in-flight cap, its pace and the spending
// caps, each checked by its owner's rule (the Lua includes of queue/inflight.ts, queue/line.ts and
// queue/budget.ts), taken only when all three say yes, and none when the plate has its outcome
// already (queue/batch/). Four round trips a create became one (issue 21); the owners still alone
// name their keys: each hands its part of the call (`terms`).

import type { RedisClient } from '../redis/connection.js';
import { type Scripted, withScripts } from '../redis/scripts.js';
import type { OutcomeStore } from './batch/outcomes.js';
import type { Budget } from './budget.js';
import type { InFlight } from './inflight.js';
import { type AccountLine, type Slot, type SlotReply, slotOf } from './line.js';

/** Admitted or not by the pace (a Slot), or refused by a cap before any slot was taken. */
export type CreateVerdict =
  | Slot
  | { refused: 'inflight' }
  | { refused: 'batch' | 'day' | 'month' }
  /** The plate has its outcome: nothing taken, its in-flight slot (if any) given back. */
  | { refused: 'finished' };

export class CreateAdmission {
  readonly #redis: Scripted<'create-admit'>;
  readonly #line: AccountLine;
  readonly #inflight: InFlight;
  readonly #budget: Budget;
  readonly #outcomes: OutcomeStore;

  constructor(redis: RedisClient, line: AccountLine, inflight: InFlight, budget: Budget, outcomes: OutcomeStore) {
    this.#redis = withScripts(redis, ['create-admit']);
    this.#line = line;
    this.#inflight = inflight;
    this.#budget = budget;
    this.#outcomes = outcomes;
  }

  /**
   * One create of `jobId` (`plate` of batch `batchId`): a pacing slot within `horizonMs`, with its
   * in-flight slot and cap unit. `inflightCap`: a lower in-flight cap for this create (first contact).
   * `home`: the account the batch lives in (another key's, for a pooled batch; docs/plans.md).
   */
  async take(
    jobId: string,
    batchId: string,
    plate: string,
    horizonMs: number,
    now: number,
    inflightCap?: number,
    urgent = false,
    home = this.#line.account.id,
  ): Promise<CreateVerdict> {
    const account = this.#line.account.id;
    const pace = this.#line.paceTerms(horizonMs, undefined, urgent);
    const inflight = this.#inflight.terms(account, jobId, batchId, now, inflightCap);
    const budget = this.#budget.terms(account, batchId, home);
    const outcome = this.#outcomes.existsTerms({ id: batchId, account: home }, plate);
    const reply = (await this.#redis.vqbCreateAdmit(
      ...pace.keys,
      ...inflight.keys,
      ...budget.keys,
      ...outcome.keys,
      ...pace.args,
      ...inflight.args,
      ...budget.args,
      ...outcome.args,
      // ARGV[15], the pace's now: only a test that owns time has one (line.ts).
      ...pace.at,
    )) as [number, string, string];
    if (reply[0] === -3) return { refused: 'finished' };
    if (reply[0] === -1) return { refused: 'inflight' };
    if (reply[0] === -2) return { refused: reply[2] as 'batch' | 'day' | 'month' };
    return slotOf(reply as SlotReply);
  }
}

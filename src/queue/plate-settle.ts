// A plate's end in one Redis step: its terminal outcome stored (the rule of queue/batch/outcomes.ts),
// its in-flight slot given back (queue/inflight.ts), the answer that ended it counted
// (queue/costs.ts) and a pointer to its result kept for later batches (queue/reuse.ts). Four round
// trips a plate became one (issues 21 and 43: a worker's CPU is mostly the writes it sends Redis).
// Each owner still alone names its keys: it hands its part (`terms`).

import type { RedisClient } from '../redis/connection.js';
import { type Scripted, withScripts } from '../redis/scripts.js';
import { encodeOutcome, type OutcomeStore, type RecordResult, recordResult } from './batch/outcomes.js';
import type { CostCount } from './costs.js';
import type { InFlight } from './inflight.js';
import type { PointerTerms } from './reuse.js';
import type { Outcome } from './types.js';

export interface Settling {
  outcome: Outcome;
  /** Where the batch lives. */
  account: string;
  /** The account whose key made the plate's requests (its in-flight slot is given back); default `account`. */
  key?: string;
  jobId: string;
  /** The cost keys (always: the script's keys are fixed) and the fields to count ('' = none). */
  count: CostCount;
  /** Cost fields counted only if this outcome is the one stored (`reused`), comma-separated. */
  countIfStored?: string;
  /** The pointer to the paid result, for later batches (queue/reuse.ts), when it is written here. */
  pointer?: PointerTerms;
}

export class PlateSettle {
  readonly #redis: Scripted<'plate-settle'>;
  readonly #outcomes: OutcomeStore;
  readonly #inflight: InFlight;

  constructor(redis: RedisClient, outcomes: OutcomeStore, inflight: InFlight) {
    this.#redis = withScripts(redis, ['plate-settle']);
    this.#outcomes = outcomes;
    this.#inflight = inflight;
  }

  /**
   * The call, made once per settling: the outcome packed here, so a call retried after its reply
   * was lost sends the same bytes and the script knows it counted already.
   */
  prepare(s: Settling): () => Promise<RecordResult> {
    const outcome = this.#outcomes.terms(s.account, s.outcome, encodeOutcome(s.outcome));
    const release = this.#inflight.releaseTerms(s.key ?? s.account, s.jobId, s.outcome.batchId);
    const args = [
      ...outcome.keys,
      ...release.keys,
      ...s.count.keys,
      // The script's keys are fixed: with no pointer to write, the outcomes hash stands in.
      s.pointer?.keys[0] ?? outcome.keys[0]!,
      ...outcome.args,
      ...release.args,
      s.count.dayTtlS,
      s.count.fields,
      ...(s.pointer?.args ?? ['', '', '']),
      s.countIfStored ?? '',
    ];
    return async () => recordResult(await this.#redis.vqbPlateSettle(...args));
  }
}

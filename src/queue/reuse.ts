// Results kept per normalised plate so that a later batch may answer from them instead of paying
// again (opt-in per batch with a window such as 24h), for VQ_REUSE_KEEP.
//
// Every paid result is findable, whichever batch paid for it (issue 36: `--reuse-within 24h` paid
// again for plates another batch, one that had not asked for reuse, finished three minutes before).
// - Reuse on (the deployment's default window VQ_REUSE_WITHIN is set, or the batch that paid asked
//   for reuse itself): the result itself, packed as outcomes are (src/redis/compact.ts; plain-JSON
//   entries written before are still read), one string key a plate (A:reuse:<plate>), expiring
//   after VQ_REUSE_KEEP: about 290 bytes a plate.
// - Otherwise (the default): a pointer to the paying batch's own outcome, which that batch keeps
//   anyway, as a field of the hash of the UTC day it was paid (A:reuse-day:<day>: plate →
//   "<at, base 36> <batch>", and " <account>" in the shared pool), the hash expiring VQ_REUSE_KEEP
//   after its day ends: a field of a hash costs about half of a key of its own (docs/operations.md),
//   writing one is one HSET, and a lookup asks one hash a day of its window. A pointer answers
//   only while its batch holds the outcome (not once it is deleted or pruned), and never past
//   VQ_REUSE_KEEP.
//
// Results stay within the account that paid for them: another account's dry run must not learn
// that a plate was looked up, nor its batch get that result and query id. Accounts whose settings
// say `shareResults` keep theirs in one pool they all read (G:reuse:<plate>, G:reuse-day:<day>).

import { pack, unpack } from '../redis/compact.js';
import type { RedisClient } from '../redis/connection.js';
import type { VqbKeys } from '../redis/keys.js';
import type { OutcomeStore } from './batch/outcomes.js';

const DAY_MS = 86_400_000;

export interface StoredResult {
  queryId?: string;
  result: unknown;
  /** Epoch ms the result was stored (its age is measured from here). */
  at: number;
}

/** Where a paid result lies when only a pointer was kept: the paying batch's outcome of the plate. */
interface Pointer {
  at: number;
  account: string;
  batchId: string;
}

/** A pointer field's value; `account` is the day hash's own account unless the value names one (the shared pool). */
function readPointer(raw: string | null, account: string): Pointer | undefined {
  const [at, batchId, payer] = (raw ?? '').split(' ');
  return at && batchId ? { at: Number.parseInt(at, 36), account: payer ?? account, batchId } : undefined;
}

/** The accounts whose settings opt in to the shared pool of results. */
export function sharingAccounts(accounts: readonly { id: string; shareResults?: boolean }[]): string[] {
  return accounts.filter((a) => a.shareResults === true).map((a) => a.id);
}

/**
 * A pointer's write for a script that stores the outcome anyway (queue/plate-settle.ts): its day
 * hash (a key of the account's slot), the field and value, and the hash's time to live, set by the
 * script when the hash has none.
 */
export interface PointerTerms {
  keys: [day: string];
  args: [plate: string, value: string, expireMs: string];
}

export class ReuseStore {
  readonly #redis: RedisClient;
  readonly #keys: VqbKeys;
  readonly #keepMs: number;
  readonly #defaultWithinMs: number;
  readonly #sharing: ReadonlySet<string>;
  readonly #outcomes: Pick<OutcomeStore, 'get' | 'has'>;
  /** Day hashes whose expiry this process has set: a pointer is then one HSET (issue 21 counts calls a plate). */
  readonly #expiring = new Set<string>();

  /**
   * `defaultWithinMs`: VQ_REUSE_WITHIN; when set, every batch's results are kept whole for later ones.
   * `sharing`: the accounts whose settings opt in to one shared pool of results.
   * `outcomes`: where a pointer's result is read.
   */
  constructor(
    redis: RedisClient,
    keys: VqbKeys,
    outcomes: Pick<OutcomeStore, 'get' | 'has'>,
    options: { keepMs: number; defaultWithinMs?: number; sharing?: Iterable<string> },
  ) {
    this.#redis = redis;
    this.#keys = keys;
    this.#outcomes = outcomes;
    this.#keepMs = options.keepMs;
    this.#defaultWithinMs = options.defaultWithinMs ?? 0;
    this.#sharing = new Set(options.sharing ?? []);
  }

  /** Where the account's whole results are kept and found: its own, or the sharing accounts' pool. */
  #key(account: string, plate: string): string {
    return this.#sharing.has(account) ? this.#keys.reuse(plate) : this.#keys.accountReuse(account, plate);
  }

  /** The hash of the pointers to the results paid on UTC day `day` (days since the epoch). */
  #dayKey(account: string, day: number): string {
    return this.#sharing.has(account) ? this.#keys.reuseDay(day) : this.#keys.accountReuseDay(account, day);
  }

  /** The day hashes a window reaches back to, newest first (never past VQ_REUSE_KEEP). */
  #days(account: string, withinMs: number, now: number): string[] {
    const oldest = Math.floor((now - Math.min(withinMs, this.#keepMs)) / DAY_MS);
    const out: string[] = [];
    for (let day = Math.floor(now / DAY_MS); day >= oldest; day--) out.push(this.#dayKey(account, day));
    return out;
  }

  get enabled(): boolean {
    return this.#keepMs > 0;
  }

  /** Whether a result paid for by a batch with this reuse window is kept whole (else as a pointer to its batch). */
  keeps(batchWindowMs: number): boolean {
    return this.enabled && (this.#defaultWithinMs > 0 || batchWindowMs > 0);
  }

  /**
   * Keeps the result paid for by batch `batchId`: whole when `keeps(batchWindowMs)`, otherwise a
   * pointer to the batch's outcome.
   */
  async save(account: string, plate: string, entry: StoredResult, batchId: string, batchWindowMs = 0): Promise<void> {
    if (!this.enabled) return;
    if (this.keeps(batchWindowMs)) {
      await this.#redis.set(this.#key(account, plate), pack(entry), 'PX', this.#keepMs);
      return;
    }
    const day = Math.floor(entry.at / DAY_MS);
    const key = this.#dayKey(account, day);
    const value = `${entry.at.toString(36)} ${batchId}${this.#sharing.has(account) ? ` ${account}` : ''}`;
    if (this.#expiring.has(key)) {
      await this.#redis.hset(key, plate, value);
      return;
    }
    // The day's last pointer is written before its end: it expires VQ_REUSE_KEEP after that.
    const replies = await this.#redis
      .pipeline()
      .hset(key, plate, value)
      .pexpire(key, (day + 1) * DAY_MS + this.#keepMs - entry.at)
      .exec();
    const failed = replies?.find(([err]) => err)?.[0];
    if (failed) throw failed;
    if (this.#expiring.size >= 1_000) this.#expiring.clear();
    this.#expiring.add(key);
  }

  /**
   * The pointer a settling script writes with the outcome it stores (one round trip a plate fewer,
   * issue 43), when the result is kept as a pointer in the account's own day hash. A result kept
   * whole, or in the shared pool (another slot of a Cluster), has none (undefined): `save` keeps
   * it after the outcome is stored, as before.
   */
  pointerTerms(
    account: string,
    plate: string,
    at: number,
    batchId: string,
    batchWindowMs = 0,
  ): PointerTerms | undefined {
    if (!this.enabled || this.keeps(batchWindowMs) || this.#sharing.has(account)) return undefined;
    const day = Math.floor(at / DAY_MS);
    // The day's last pointer is written before its end: it expires VQ_REUSE_KEEP after that.
    const expireMs = (day + 1) * DAY_MS + this.#keepMs - at;
    return {
      keys: [this.#keys.accountReuseDay(account, day)],
      args: [plate, `${at.toString(36)} ${batchId}`, String(expireMs)],
    };
  }

  /** The stored result if it is at most `withinMs` old. */
  async find(
    account: string,
    plate: string,
    withinMs: number,
    now: number,
  ): Promise<(StoredResult & { ageMs: number }) | undefined> {
    if (withinMs <= 0 || !this.enabled) return undefined;
    const raw = await this.#redis.getBuffer(this.#key(account, plate));
    if (raw) {
      const entry = unpack(raw) as StoredResult;
      const ageMs = now - entry.at;
      if (ageMs <= withinMs) return { ...entry, ageMs };
    }
    for (const day of this.#days(account, withinMs, now)) {
      const pointer = readPointer(await this.#redis.hget(day, plate), account);
      if (pointer === undefined) continue;
      const ageMs = now - pointer.at;
      if (ageMs > withinMs || ageMs > this.#keepMs) return undefined;
      const outcome = await this.#outcomes.get({ id: pointer.batchId, account: pointer.account }, plate);
      // The paying batch was deleted or pruned (or retried that plate): nothing left to reuse.
      if (outcome?.status !== 'done') return undefined;
      return {
        ...(outcome.queryId ? { queryId: outcome.queryId } : {}),
        result: outcome.result,
        at: pointer.at,
        ageMs,
      };
    }
    return undefined;
  }

  /** How many of these plates have a result within the window (for dry runs): exactly those `find` would answer. */
  async countFresh(account: string, plates: readonly string[], withinMs: number, now: number): Promise<number> {
    if (withinMs <= 0 || plates.length === 0 || !this.enabled) return 0;
    const raws = await this.#redis.mgetBuffer(...plates.map((p) => this.#key(account, p)));
    const whole = raws.map((raw) => raw !== null && now - (unpack(raw) as StoredResult).at <= withinMs);
    const left = plates.filter((_, i) => !whole[i]);
    // The newest pointer of each plate left, its day hashes asked together.
    const pointers = new Map<string, Pointer>();
    const days = left.length === 0 ? [] : this.#days(account, withinMs, now);
    const fields = await Promise.all(days.map((day) => this.#redis.hmget(day, ...left)));
    for (const values of fields)
      values.forEach((value, i) => {
        const pointer = readPointer(value, account);
        if (pointer && !pointers.has(left[i]!)) pointers.set(left[i]!, pointer);
      });
    // A pointer counts while its batch still holds the outcome (the checks go out together).
    const found = await Promise.all(
      [...pointers].map(([plate, p]) =>
        now - p.at <= Math.min(withinMs, this.#keepMs)
          ? this.#outcomes.has({ id: p.batchId, account: p.account }, plate)
          : false,
      ),
    );
    return whole.filter(Boolean).length + found.filter(Boolean).length;
  }
}

// Results kept per normalised plate so that a later batch may answer from them instead of paying
// again (opt-in per batch with a window such as 24h). Each entry expires after VQ_REUSE_KEEP.
//
// An entry is written only when reuse is on: the deployment's default window (VQ_REUSE_WITHIN) is
// set, or the batch that paid for the result asked for reuse itself. With reuse off (the default)
// nothing is kept per plate: that was 584 bytes of Redis a plate, for 7 days, that nothing read.
// Entries are packed as outcomes are (queue/compact.ts); plain-JSON entries written before are
// still read.
//
// Results stay within the account that paid for them (A:reuse:<plate>): another account's dry run
// must not learn that a plate was looked up, nor its batch get that result and query id. Accounts
// whose settings say `shareResults` keep theirs in one pool they all read (G:reuse:<plate>).
import { pack, unpack } from './compact.js';
import type { VqbKeys } from './keys.js';
import type { RedisClient } from './redis.js';

export interface StoredResult {
  queryId?: string;
  result: unknown;
  /** Epoch ms the result was stored (its age is measured from here). */
  at: number;
}

/** The accounts whose settings opt in to the shared pool of results. */
export function sharingAccounts(accounts: readonly { id: string; shareResults?: boolean }[]): string[] {
  return accounts.filter((a) => a.shareResults === true).map((a) => a.id);
}

export class ReuseStore {
  readonly #redis: RedisClient;
  readonly #keys: VqbKeys;
  readonly #keepMs: number;
  readonly #defaultWithinMs: number;
  readonly #sharing: ReadonlySet<string>;

  /**
   * `defaultWithinMs`: VQ_REUSE_WITHIN; when set, every batch's results are kept for later ones.
   * `sharing`: the accounts whose settings opt in to one shared pool of results.
   */
  constructor(redis: RedisClient, keys: VqbKeys, keepMs: number, defaultWithinMs = 0, sharing: Iterable<string> = []) {
    this.#redis = redis;
    this.#keys = keys;
    this.#keepMs = keepMs;
    this.#defaultWithinMs = defaultWithinMs;
    this.#sharing = new Set(sharing);
  }

  /** Where the account's results are kept and found: its own, or the sharing accounts' pool. */
  #key(account: string, plate: string): string {
    return this.#sharing.has(account) ? this.#keys.reuse(plate) : this.#keys.accountReuse(account, plate);
  }

  get enabled(): boolean {
    return this.#keepMs > 0;
  }

  /** Whether a result paid for by a batch with this reuse window is kept for later batches. */
  keeps(batchWindowMs: number): boolean {
    return this.enabled && (this.#defaultWithinMs > 0 || batchWindowMs > 0);
  }

  /** Keeps the result when `keeps(batchWindowMs)`; otherwise writes nothing. */
  async save(account: string, plate: string, entry: StoredResult, batchWindowMs = 0): Promise<void> {
    if (!this.keeps(batchWindowMs)) return;
    await this.#redis.set(this.#key(account, plate), pack(entry), 'PX', this.#keepMs);
  }

  /** The stored result if it is at most `withinMs` old. */
  async find(
    account: string,
    plate: string,
    withinMs: number,
    now: number,
  ): Promise<(StoredResult & { ageMs: number }) | undefined> {
    if (withinMs <= 0) return undefined;
    const raw = await this.#redis.getBuffer(this.#key(account, plate));
    if (!raw) return undefined;
    const entry = unpack(raw) as StoredResult;
    const ageMs = now - entry.at;
    return ageMs <= withinMs ? { ...entry, ageMs } : undefined;
  }

  /** How many of these plates have a result within the window (for dry runs). */
  async countFresh(account: string, plates: readonly string[], withinMs: number, now: number): Promise<number> {
    if (withinMs <= 0 || plates.length === 0) return 0;
    const raws = await this.#redis.mgetBuffer(...plates.map((p) => this.#key(account, p)));
    return raws.filter((raw) => raw !== null && now - (unpack(raw) as StoredResult).at <= withinMs).length;
  }
}

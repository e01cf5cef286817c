// Results kept per normalised plate so that a later batch may answer from them instead of paying
// again (opt-in per batch with a window such as 24h). Each entry expires after VQ_REUSE_KEEP.
//
// Every paid result is findable, whichever batch paid for it (issue 36: `--reuse-within 24h` paid
// again for plates another batch, one that had not asked for reuse, finished three minutes before).
// When reuse is on (the deployment's default window VQ_REUSE_WITHIN is set, or the batch that paid
// asked for reuse itself) the entry is the result, packed as outcomes are (queue/compact.ts;
// plain-JSON entries written before are still read). Otherwise it is only a pointer to the paying
// batch's outcome, which that batch keeps anyway: `>` <at> <account> <batch>, about 140 bytes of
// Redis against 290 for a whole entry (docs/operations.md), gone for reuse once that batch is.
//
// Results stay within the account that paid for them (A:reuse:<plate>): another account's dry run
// must not learn that a plate was looked up, nor its batch get that result and query id. Accounts
// whose settings say `shareResults` keep theirs in one pool they all read (G:reuse:<plate>).
import type { OutcomeStore } from './batch/outcomes.js';
import { pack, unpack } from './compact.js';
import type { VqbKeys } from './keys.js';
import type { RedisClient } from './redis.js';

/** The first byte of a pointer entry (a packed entry starts with 0x01, a plain-JSON one with `{`). */
const POINTER = '>';

/** Where a paid result lies when only a pointer was kept: the paying batch's outcome of the plate. */
interface Pointer {
  at: number;
  account: string;
  batchId: string;
}

function readPointer(raw: Buffer): Pointer | undefined {
  if (raw[0] !== POINTER.charCodeAt(0)) return undefined;
  const [at, account, batchId] = raw.toString('utf8').slice(1).split(' ');
  return at && account && batchId ? { at: Number(at), account, batchId } : undefined;
}

function storedAt(raw: Buffer): number {
  return readPointer(raw)?.at ?? (unpack(raw) as StoredResult).at;
}

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
  readonly #outcomes: Pick<OutcomeStore, 'get' | 'has'>;

  /**
   * `defaultWithinMs`: VQ_REUSE_WITHIN; when set, every batch's results are kept whole for later ones.
   * `sharing`: the accounts whose settings opt in to one shared pool of results.
   * `outcomes`: where a pointer entry's result is read.
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

  /** Where the account's results are kept and found: its own, or the sharing accounts' pool. */
  #key(account: string, plate: string): string {
    return this.#sharing.has(account) ? this.#keys.reuse(plate) : this.#keys.accountReuse(account, plate);
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
    const value = this.keeps(batchWindowMs) ? pack(entry) : `${POINTER}${entry.at} ${account} ${batchId}`;
    await this.#redis.set(this.#key(account, plate), value, 'PX', this.#keepMs);
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
    const pointer = readPointer(raw);
    if (pointer === undefined) {
      const entry = unpack(raw) as StoredResult;
      const ageMs = now - entry.at;
      return ageMs <= withinMs ? { ...entry, ageMs } : undefined;
    }
    const ageMs = now - pointer.at;
    if (ageMs > withinMs) return undefined;
    const outcome = await this.#outcomes.get({ id: pointer.batchId, account: pointer.account }, plate);
    // The paying batch was deleted or pruned (or retried that plate): nothing left to reuse.
    if (outcome?.status !== 'done') return undefined;
    return { ...(outcome.queryId ? { queryId: outcome.queryId } : {}), result: outcome.result, at: pointer.at, ageMs };
  }

  /** How many of these plates have a result within the window (for dry runs). */
  async countFresh(account: string, plates: readonly string[], withinMs: number, now: number): Promise<number> {
    if (withinMs <= 0 || plates.length === 0) return 0;
    const raws = await this.#redis.mgetBuffer(...plates.map((p) => this.#key(account, p)));
    // A pointer counts while its batch still holds the outcome (the checks go out together).
    const found = await Promise.all(
      raws.map((raw, i) => {
        if (raw === null || now - storedAt(raw) > withinMs) return false;
        const pointer = readPointer(raw);
        return pointer ? this.#outcomes.has({ id: pointer.batchId, account: pointer.account }, plates[i]!) : true;
      }),
    );
    return found.filter(Boolean).length;
  }
}

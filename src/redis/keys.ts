// The name of every Redis key vqb owns, and which module owns it. A structure is read and written
// only by its owner module; `test/unit/ownership.test.ts` checks that no other module names it.
//
// Two homes (issue 21: a Redis Cluster spreads the accounts instead of holding all in one slot):
// - **An account's slot**: `<bare>:{<queue>.<account>}:…`, where `<bare>` is the prefix without
//   its braces (`{vqb}` → `vqb`). The braces make `<queue>.<account>` the hash tag, so the account's
//   BullMQ queue (`<bare>:{<queue>.<account>}:wait`, …), its line, pace, in-flight set, scheduling,
//   spend and costs, and every key of each of its batches share one slot: one Lua script may touch
//   all of them, and on a Cluster each account lands where its slot is.
// - **The global slot**: `<prefix>:<queue>:vqb:…` (the prefix's own hash tag): the few structures
//   every account shares, touched apart from any account's keys.
//
// Account slot, `A = <bare>:{<queue>.<account>}:vqb`:
// | key                              | type   | owner                     |
// |----------------------------------|--------|---------------------------|
// | A:batch:<id>, :rows, :outcomes   | hash, list, hash | queue/batch/    |
// | A:batches                        | zset   | queue/batch/ (the account's batches by creation) |
// | A:batch-content:<sha256>         | string | queue/batch/ (the account's batch made from that content) |
// | G:ratelimit:<key>                | string | http/rate-limit.ts (@fastify/rate-limit's counts) |
// | A:batch:<id>:ingest              | string | queue/batch/ (ingest lock) |
// | A:line, A:pace                   | hash   | queue/line.ts (the account's line, pacing) |
// | A:hold                           | string | queue/line.ts (a hold in force, expiring with it) |
// | A:answers                        | hash   | queue/answers.ts (first contact; the answer that held the account) |
// | A:inflight, A:inflight:batches   | zset, hash | queue/inflight.ts     |
// | A:sched:<class>, :weights, :staged, :pending:<batch>, :active, :deadlines | | queue/scheduler.ts |
// | A:spend:d:<day>, :m:<month>, A:budget, A:budget:batch:<id> | | queue/budget.ts |
// | A:cost:<day>, A:cost:batch:<id>  | hash   | queue/costs.ts            |
// | G:cost:<day>                     | hash   | queue/costs.ts (days counted before this layout, read only) |
// | A:batch:<id>:webhooks            | hash   | webhooks/ (deliveries of the batch's events) |
// | A:series:batch:<id>, A:series:account | list | queue/series.ts (the console's charts: bounded samples) |
// | A:batch:<id>:traces              | hash   | queue/plate-traces.ts (tracing on: plate → its trace context) |
// | A:console:failed:<id>            | string | console/failed-plates.ts (failed plates by code, as last counted) |
// Global slot, `G = <prefix>:<queue>:vqb`:
// | G:batches, G:batches:account     | zset, hash | queue/batch/ (every batch id by creation; who holds it) |
// | G:active                         | zset   | queue/scheduler.ts (accounts with work) |
// | G:deadline-accounts              | set    | queue/scheduler.ts (accounts given a deadline batch) |
// | G:learn:<product>                | hash   | queue/poll-schedule.ts    |
// | G:answers                        | hash   | queue/answers.ts (an upstream's understood shape, by upstreamOf) |
// | G:reuse:<plate>, A:reuse:<plate> | string | queue/reuse.ts (shared by opted-in accounts; the account's own) |
// | G:reuse-day:<day>, A:reuse-day:<day> | hash | queue/reuse.ts (plate → the batch that paid on that UTC day) |
// | G:inbox:<name>                   | hash   | producers/inbox*.ts       |
// | G:console:session:<sha256 of id> | hash   | console/sessions.ts       |
// | G:console:upload:<id>            | string | console/uploads.ts (staged before confirm) |
// | G:console:uploads                | zset   | console/uploads.ts (every staged upload, its owner and size) |
// | G:console:sign-in-failures:<sha256 of address> | string | console/throttle.ts |
// | G:workers, G:retention:lock      | zset, string | queue/presence.ts, src/retention.ts |
// | G:layout                         | string | src/redis/layout.ts (which key layout the data is in) |
// | G:layout-unlocked                | channel | src/redis/layout.ts (pub/sub: the migration lock released) |
// | G:wake                           | channel | queue/feeder.ts (pub/sub: "this account has work", its queue fed) |
// | G:holds                          | channel | queue/hold-news.ts (pub/sub: a hold set or lifted; line.ts sends) |
// | G:ingest-unlocked                | channel | queue/batch/store.ts (pub/sub: an ingest lock released) |
// | A:batch:<id>:finished            | channel | queue/batch/ (pub/sub: batch-finish.lua publishes; batch.done hears) |
// | A:batch:<id>:webhooks:changed    | channel | webhooks/deliveries.ts (pub/sub: an attempt recorded) |
// | A:watch:<name>, :plates, :removed, :last, :history, :rounds, :changes:<n>, :close:<n> | | watch/store.ts |
// | A:watches, G:watches             | zset   | watch/store.ts (the account's watches; every watch, for the sweep) |
// BullMQ owns the keys of each account's queue (`<bare>:{<queue>.<account>}:*`) and of the
// webhook deliveries' queue (`<prefix>:<queue>.webhooks:*`, global slot), and of the watches'
// round schedules (`<prefix>:<queue>.watches:*`, global slot).

/** A watch list as its keys need it: its name and the account whose slot holds it. */
export interface WatchRef {
  account: string;
  name: string;
}

// The ids that key names are made of, checked before they reach a key (`x:rows` would name
// another structure of batch `x`): an account's id, a batch's id, a priority class.
export const ACCOUNT_ID = /^[a-z0-9][a-z0-9_-]{0,31}$/;
/**
 * A batch's id: set by its producer, or made from the file's name and content, or given
 * (`batchId`, `--batch-id`). Anything else is refused before it reaches a key: not found, or
 * BAD_BATCH_ID. An id is scoped by its account: two accounts may each hold `order-1001`.
 */
export const BATCH_ID = /^[A-Za-z0-9_-]{1,100}$/;
/** How urgent a batch is: interactive (a person waits), normal, bulk. Each has its own lane. */
export type PriorityClass = 'interactive' | 'normal' | 'bulk';
export const PRIORITY_CLASSES: readonly PriorityClass[] = ['interactive', 'normal', 'bulk'];

/** A batch as its keys need it: its id and the account whose slot holds it. */
export interface BatchRef {
  id: string;
  account: string;
}

/**
 * A batch named by its id alone (found through the index of homes: it may be held by several
 * accounts) or by its ref (its account known: the front doors resolve a token's scope to a ref,
 * a job carries its account).
 */
export type BatchKey = string | BatchRef;

/** The prefix without its hash-tag braces: `{vqb}` → `vqb`. */
export function barePrefix(prefix: string): string {
  return prefix.replace(/[{}]/g, '');
}

/** What BullMQ is given for an account's queue: the account's hash tag is the queue name. */
export function accountQueueName(settings: KeySettings, accountId: string): { name: string; prefix: string } {
  return { name: `{${settings.queueName}.${accountId}}`, prefix: barePrefix(settings.prefix) };
}

/** SCAN patterns that match every key of a deployment (both homes): for tools and tests that clear one. */
export function deploymentPatterns(prefix: string): string[] {
  const bare = barePrefix(prefix);
  return bare === prefix ? [`${prefix}:*`] : [`${prefix}:*`, `${bare}:{*`];
}

export interface KeySettings {
  prefix: string;
  queueName: string;
}

export class VqbKeys {
  /** The global slot's base (`G`). */
  readonly base: string;
  readonly #settings: KeySettings;
  readonly #bare: string;

  constructor(settings: KeySettings) {
    this.#settings = { prefix: settings.prefix, queueName: settings.queueName };
    this.base = `${settings.prefix}:${settings.queueName}:vqb`;
    this.#bare = barePrefix(settings.prefix);
  }

  /** The account's slot's base (`A`). */
  accountBase(accountId: string): string {
    return `${this.#bare}:{${this.#settings.queueName}.${accountId}}:vqb`;
  }

  /** The hash tag of the account's slot (CLUSTER KEYSLOT of it is the account's slot). */
  accountTag(accountId: string): string {
    return `${this.#settings.queueName}.${accountId}`;
  }

  // --- queue/batch/
  get batches(): string {
    return `${this.base}:batches`;
  }

  /**
   * Prefix of the HTTP API's request counts (@fastify/rate-limit's store appends its key: a token's
   * digest or an address).
   */
  get apiRateLimit(): string {
    return `${this.base}:ratelimit:`;
  }

  /** String: set once every batch stored before accounts kept their own lists is in its account's. */
  get batchListsIndexed(): string {
    return `${this.base}:batches:indexed`;
  }

  /** Zset: the account's batches by creation (a scoped token's list reads only this). */
  accountBatches(accountId: string): string {
    return `${this.accountBase(accountId)}:batches`;
  }

  /** Hash: batch id → the accounts holding a batch of that id (space-separated; where its keys live). */
  get batchAccounts(): string {
    return `${this.base}:batches:account`;
  }

  batch(b: BatchRef): string {
    return `${this.accountBase(b.account)}:batch:${b.id}`;
  }

  outcomes(b: BatchRef): string {
    return `${this.batch(b)}:outcomes`;
  }

  rows(b: BatchRef): string {
    return `${this.batch(b)}:rows`;
  }

  ingestLock(b: BatchRef): string {
    return `${this.batch(b)}:ingest`;
  }

  /** Pub/sub channel (not a key): the batch finished (lua/includes/batch-finish.lua publishes on it). */
  batchFinished(b: BatchRef): string {
    return `${this.batch(b)}:finished`;
  }

  /** Hash, tracing on only: plate → its W3C traceparent and when it entered the scheduler (queue/plate-traces.ts). */
  plateTraces(b: BatchRef): string {
    return `${this.batch(b)}:traces`;
  }

  /** String: the id of the account's batch made from this content (sha256), whichever door it came through. */
  batchContent(accountId: string, digest: string): string {
    return `${this.accountBase(accountId)}:batch-content:${digest}`;
  }

  // --- queue/line.ts
  account(accountId: string): string {
    return `${this.accountBase(accountId)}:line`;
  }

  pace(accountId: string): string {
    return `${this.accountBase(accountId)}:pace`;
  }

  /**
   * Where a hold's end lived as a key's time to live until holds became the pace hash's `hold`
   * field alone (compared with a now: pace-held): nothing reads it; the layout migration still
   * moves an old one, which expires by itself.
   */
  paceHold(accountId: string): string {
    return `${this.accountBase(accountId)}:hold`;
  }

  // --- queue/answers.ts
  answers(accountId: string): string {
    return `${this.accountBase(accountId)}:answers`;
  }

  /** Hash (global): the shape understood for each upstream (base URL, product, answer settings). */
  upstreamAnswers(): string {
    return `${this.base}:answers`;
  }

  // --- queue/inflight.ts
  inflight(accountId: string): string {
    return `${this.accountBase(accountId)}:inflight`;
  }

  inflightByBatch(accountId: string): string {
    return `${this.accountBase(accountId)}:inflight:batches`;
  }

  // --- queue/scheduler.ts
  schedClass(accountId: string, cls: string): string {
    return `${this.accountBase(accountId)}:sched:${cls}`;
  }

  schedWeights(accountId: string): string {
    return `${this.accountBase(accountId)}:sched:weights`;
  }

  /** Zset: the account's batches that carry a deadline (batch id -> deadline, epoch ms). */
  schedDeadlines(accountId: string): string {
    return `${this.accountBase(accountId)}:sched:deadlines`;
  }

  /** The prefix of the account's per-batch lists of plates waiting to be created (the script appends the id). */
  pendingPrefix(accountId: string): string {
    return `${this.accountBase(accountId)}:sched:pending:`;
  }

  pending(b: BatchRef): string {
    // A pooled batch lent to another key of its pool is listed there as `<id>@<home>`: its plates
    // wait in one list, the home's (queue/scheduler.ts).
    const lent = /^(.+)@([a-z0-9_-]+)$/.exec(b.id);
    return lent ? `${this.pendingPrefix(lent[2]!)}${lent[1]}` : `${this.pendingPrefix(b.account)}${b.id}`;
  }

  /** The pending prefix of any account, its id left as `{{home}}` (sched-take.lua fills it in for a lent batch). */
  get pendingTemplate(): string {
    return this.pendingPrefix('{{home}}');
  }

  staged(accountId: string): string {
    return `${this.accountBase(accountId)}:sched:staged`;
  }

  /**
   * Hash on the account's slot: `on` while it has work, `gen` the generation of its current stay
   * among the active accounts.
   */
  schedActiveFlag(accountId: string): string {
    return `${this.accountBase(accountId)}:sched:active`;
  }

  /** Sorted set (global): the accounts with work, scored by the generation their flag was set at. */
  get schedActive(): string {
    return `${this.base}:active`;
  }

  /** Set (global): the accounts that were given a batch with a deadline (the deadline watch looks at these only). */
  get schedDeadlineAccounts(): string {
    return `${this.base}:deadline-accounts`;
  }

  // --- queue/budget.ts
  spendDay(accountId: string, day: string): string {
    return `${this.accountBase(accountId)}:spend:d:${day}`;
  }

  spendMonth(accountId: string, month: string): string {
    return `${this.accountBase(accountId)}:spend:m:${month}`;
  }

  budget(accountId: string): string {
    return `${this.accountBase(accountId)}:budget`;
  }

  batchBudget(b: BatchRef): string {
    return `${this.accountBase(b.account)}:budget:batch:${b.id}`;
  }

  // --- queue/costs.ts
  costDay(accountId: string, day: string): string {
    return `${this.accountBase(accountId)}:cost:${day}`;
  }

  /** A day's costs of every account, as counted before the per-account layout (read in place). */
  legacyCostDay(day: string): string {
    return `${this.base}:cost:${day}`;
  }

  batchCosts(b: BatchRef): string {
    return `${this.accountBase(b.account)}:cost:batch:${b.id}`;
  }

  // --- queue/series.ts
  /** List: samples of a batch's progress over its life, bounded and thinned (the console's charts). */
  batchSeries(b: BatchRef): string {
    return `${this.accountBase(b.account)}:series:batch:${b.id}`;
  }

  /** List: samples of the account's requests and limit over the last hour (the console's charts). */
  accountSeries(accountId: string): string {
    return `${this.accountBase(accountId)}:series:account`;
  }

  // --- queue/poll-schedule.ts
  learner(product: string): string {
    return `${this.base}:learn:${product}`;
  }

  /** The last answer times the upstream stated for the product (log(ms / initial), newest first). */
  learnerStated(product: string): string {
    return `${this.base}:learn:${product}:stated`;
  }

  // --- queue/reuse.ts
  /** The results every sharing account may reuse (accounts with `shareResults`). */
  reuse(plate: string): string {
    return `${this.base}:reuse:${plate}`;
  }

  /** The results only this account reuses (the default: reuse stays within an account). */
  accountReuse(accountId: string, plate: string): string {
    return `${this.accountBase(accountId)}:reuse:${plate}`;
  }

  /** Hash: plate → the sharing accounts' batch that paid for it on UTC day `day` (days since the epoch). */
  reuseDay(day: number): string {
    return `${this.base}:reuse-day:${day}`;
  }

  /** Hash: plate → this account's batch that paid for it on UTC day `day`. */
  accountReuseDay(accountId: string, day: number): string {
    return `${this.accountBase(accountId)}:reuse-day:${day}`;
  }

  // --- producers/inbox*.ts
  inbox(name: string): string {
    return `${this.base}:inbox:${name}`;
  }

  // --- console/sessions.ts
  consoleSession(idHash: string): string {
    return `${this.base}:console:session:${idHash}`;
  }

  // --- console/uploads.ts
  consoleUpload(id: string): string {
    return `${this.base}:console:upload:${id}`;
  }

  /** Sorted set: every staged upload (`<owner>:<id>:<bytes>`) by when it expires (the caps' ledger). */
  get consoleUploads(): string {
    return `${this.base}:console:uploads`;
  }

  // --- console/failed-plates.ts
  /** String: a batch's failed plates by code as last counted, with the counts they were counted at. */
  consoleFailed(b: BatchRef): string {
    return `${this.accountBase(b.account)}:console:failed:${b.id}`;
  }

  // --- console/throttle.ts
  consoleSignInFailures(addressHash: string): string {
    return `${this.base}:console:sign-in-failures:${addressHash}`;
  }

  // --- webhooks/
  batchWebhooks(b: BatchRef): string {
    return `${this.batch(b)}:webhooks`;
  }

  /** Pub/sub channel (not a key): a delivery of the batch's webhooks attempted (the message: its webhook-id). */
  batchWebhooksChanged(b: BatchRef): string {
    return `${this.batch(b)}:webhooks:changed`;
  }

  // --- retention.ts
  /** Sorted set: worker processes (host:pid) by the last time each said it is alive (queue/presence.ts). */
  get workers(): string {
    return `${this.base}:workers`;
  }

  get retentionLock(): string {
    return `${this.base}:retention:lock`;
  }

  // --- queue/feeder.ts
  /** Pub/sub channel (not a key): an account whose queue a producer just fed, for worker processes to fetch at once. */
  get wake(): string {
    return `${this.base}:wake`;
  }

  // --- queue/hold-news.ts
  /** Pub/sub channel (not a key): an account's hold set, lengthened or lifted, for workers to know without asking. */
  get holds(): string {
    return `${this.base}:holds`;
  }

  // --- queue/batch/store.ts
  /** Pub/sub channel (not a key): an ingest lock released (the message: the lock's key), for an ingest waiting. */
  get ingestUnlocked(): string {
    return `${this.base}:ingest-unlocked`;
  }

  // --- src/redis/layout.ts
  get layout(): string {
    return `${this.base}:layout`;
  }

  /** Pub/sub channel (not a key): the layout migration's lock released, for a process waiting on it. */
  get layoutUnlocked(): string {
    return `${this.base}:layout-unlocked`;
  }

  // --- watch/store.ts
  /** Hash: a watch list's settings and state. */
  watch(w: WatchRef): string {
    return `${this.accountBase(w.account)}:watch:${w.name}`;
  }

  /** Zset: the plates watched, by when each was added. */
  watchPlates(w: WatchRef): string {
    return `${this.watch(w)}:plates`;
  }

  /** Zset: plates taken off the list, by when (forgotten after VQ_WATCH_FORGET). */
  watchRemoved(w: WatchRef): string {
    return `${this.watch(w)}:removed`;
  }

  /** Hash: plate → its last result, flattened (packed). */
  watchLast(w: WatchRef): string {
    return `${this.watch(w)}:last`;
  }

  /** Hash: plate → its last few changes (packed). */
  watchHistory(w: WatchRef): string {
    return `${this.watch(w)}:history`;
  }

  /** Hash: round → its record (JSON). */
  watchRounds(w: WatchRef): string {
    return `${this.watch(w)}:rounds`;
  }

  /** List: round n's changes, a JSON line each. */
  watchChanges(w: WatchRef, round: number): string {
    return `${this.watch(w)}:changes:${round}`;
  }

  /** String: the lock of whoever compares round n. */
  watchClose(w: WatchRef, round: number): string {
    return `${this.watch(w)}:close:${round}`;
  }

  /** Zset: the account's watches by creation. */
  accountWatches(accountId: string): string {
    return `${this.accountBase(accountId)}:watches`;
  }

  /** Zset: every watch (`<account>/<name>`), for the sweep that compares finished rounds. */
  get watches(): string {
    return `${this.base}:watches`;
  }
}

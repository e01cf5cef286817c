// The name of every Redis key vqb owns, and which module owns it. All keys start with the
// configured prefix (default `{vqb}`), so one hash slot holds them in Redis Cluster and a Lua
// script may touch several at once. A structure is read and written only by its owner module;
// `test/unit/ownership.test.ts` checks that no other module names it.
//
// | key                              | type   | owner                     |
// |----------------------------------|--------|---------------------------|
// | batches, batch:<id>              | zset, hash | queue/batch/      |
// | batch:<id>:rows, :outcomes       | list, hash | queue/batch/      |
// | batch:<id>:ingest                | string | queue/batch/ (ingest lock) |
// | account:<id>                     | hash   | queue/line.ts (the account's line)     |
// | account:<id>:pace                | hash   | queue/line.ts (pacing)      |
// | account:<id>:hold                | string | queue/line.ts (a hold in force, expiring with it) |
// | inflight:<account>, inflight:<account>:batches | zset, hash | queue/inflight.ts |
// | sched:<account>:<class>, sched:weights, sched:pending:<batch>, sched:<account>:staged, sched:active | | queue/scheduler.ts |
// | spend:<account>:d:<day>, :m:<month>, budget:<account>, budget:batch:<id> | | queue/budget.ts |
// | cost:<day>, cost:batch:<id>      | hash   | queue/costs.ts            |
// | learn:<product>                  | hash   | queue/poll-schedule.ts    |
// | reuse:<plate>                    | string | queue/reuse.ts            |
// | inbox:<name>                     | hash   | producers/inbox*.ts       |
// | console:session:<sha256 of id>   | hash   | console/sessions.ts       |
// | console:upload:<id>              | string | console/uploads.ts (staged before confirm) |
// | retention:lock                   | string | src/retention.ts (one sweep at a time) |
// | batch:<id>:webhooks              | hash   | sinks/webhooks/ (deliveries of the batch's events) |
// BullMQ owns the keys of each account's queue (`<prefix>:<queue>.<account>:*`) and of the
// webhook deliveries' queue (`<prefix>:<queue>.webhooks:*`).

export interface KeySettings {
  prefix: string;
  queueName: string;
}

export class VqbKeys {
  readonly base: string;

  constructor(settings: KeySettings) {
    this.base = `${settings.prefix}:${settings.queueName}:vqb`;
  }

  // --- queue/batches.ts
  get batches(): string {
    return `${this.base}:batches`;
  }

  batch(batchId: string): string {
    return `${this.base}:batch:${batchId}`;
  }

  outcomes(batchId: string): string {
    return `${this.base}:batch:${batchId}:outcomes`;
  }

  rows(batchId: string): string {
    return `${this.base}:batch:${batchId}:rows`;
  }

  ingestLock(batchId: string): string {
    return `${this.base}:batch:${batchId}:ingest`;
  }

  // --- queue/line.ts
  account(accountId: string): string {
    return `${this.base}:account:${accountId}`;
  }

  pace(accountId: string): string {
    return `${this.base}:account:${accountId}:pace`;
  }

  paceHold(accountId: string): string {
    return `${this.base}:account:${accountId}:hold`;
  }

  // --- queue/inflight.ts
  inflight(accountId: string): string {
    return `${this.base}:inflight:${accountId}`;
  }

  inflightByBatch(accountId: string): string {
    return `${this.base}:inflight:${accountId}:batches`;
  }

  // --- queue/scheduler.ts
  schedClass(accountId: string, cls: string): string {
    return `${this.base}:sched:${accountId}:${cls}`;
  }

  get schedWeights(): string {
    return `${this.base}:sched:weights`;
  }

  /** The prefix of the per-batch lists of plates waiting to be created (the script appends the id). */
  get pendingPrefix(): string {
    return `${this.base}:sched:pending:`;
  }

  pending(batchId: string): string {
    return `${this.pendingPrefix}${batchId}`;
  }

  staged(accountId: string): string {
    return `${this.base}:sched:${accountId}:staged`;
  }

  /** Sorted set: the accounts with work (plates waiting or jobs on their queue), by when each became active. */
  get schedActive(): string {
    return `${this.base}:sched:active`;
  }

  // --- queue/budget.ts
  spendDay(accountId: string, day: string): string {
    return `${this.base}:spend:${accountId}:d:${day}`;
  }

  spendMonth(accountId: string, month: string): string {
    return `${this.base}:spend:${accountId}:m:${month}`;
  }

  budget(accountId: string): string {
    return `${this.base}:budget:${accountId}`;
  }

  batchBudget(batchId: string): string {
    return `${this.base}:budget:batch:${batchId}`;
  }

  // --- queue/costs.ts
  costDay(day: string): string {
    return `${this.base}:cost:${day}`;
  }

  batchCosts(batchId: string): string {
    return `${this.base}:cost:batch:${batchId}`;
  }

  // --- queue/poll-schedule.ts
  learner(product: string): string {
    return `${this.base}:learn:${product}`;
  }

  // --- queue/reuse.ts
  reuse(plate: string): string {
    return `${this.base}:reuse:${plate}`;
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

  // --- sinks/webhooks/
  batchWebhooks(batchId: string): string {
    return `${this.base}:batch:${batchId}:webhooks`;
  }

  // --- retention.ts
  /** Sorted set: worker processes (host:pid) by the last time each said it is alive (queue/presence.ts). */
  get workers(): string {
    return `${this.base}:workers`;
  }

  get retentionLock(): string {
    return `${this.base}:retention:lock`;
  }
}

// Which accounts this process runs a BullMQ Worker for: only those with work. A Worker holds a
// blocking Redis connection and its own timers (stalled checks, drain waits), so one per configured
// account made a process's cost grow with accounts it never served (issue 21: 200 idle accounts,
// 406 connections, 24,735 commands/s). Here an account's Worker, upstream client and flow start
// when the account appears in the scheduler's active set and stop IDLE_CLOSE_MS after it left it.
// Each starts from the account's record (src/queue/accounts.ts): its settings, key, queue and line.
import type { Worker } from 'bullmq';
import type { AccountRecord, Accounts } from '../src/queue/accounts.js';
import type { PlateJobData } from '../src/queue/types.js';
import type { UpstreamClient } from '../src/upstream/client.js';
import type { AccountFlow } from './flow.js';
import type { JobResult } from './processor.js';

/** How long an account stays idle before its Worker stops: a batch that follows soon reuses it. */
export const IDLE_CLOSE_MS = 10_000;

export type PlateWorker = Worker<PlateJobData, JobResult, string>;

/** What runs for one account in this process. */
export interface AccountRun {
  worker: PlateWorker;
  client: UpstreamClient;
  flow: AccountFlow;
  /**
   * Ends the waits of polls waiting in the worker (they go to BullMQ's delayed set), so a stop need
   * not wait for them.
   */
  stopWaits: () => void;
}

export class AccountWorkers {
  readonly #accounts: Pick<Accounts, 'for'>;
  readonly #start: (account: AccountRecord) => AccountRun;
  readonly #now: () => number;
  readonly #running = new Map<string, AccountRun & { idleSince: number | undefined }>();
  /** Runs stopping (idle accounts, or all at the process's stop), awaited by `closeAll`, forced by `forceAll`. */
  readonly #stopping = new Map<AccountRun, Promise<void>>();
  /** The process is stopping: a Worker started now would take jobs no one finishes. */
  #closed = false;

  constructor(accounts: Pick<Accounts, 'for'>, start: (account: AccountRecord) => AccountRun, now: () => number) {
    this.#accounts = accounts;
    this.#start = start;
    this.#now = now;
  }

  /** The account has work: its Worker runs (started now if it was not); none starts after `closeAll`. */
  busy(accountId: string): void {
    if (this.#closed) return;
    const run = this.#running.get(accountId);
    if (run) run.idleSince = undefined;
    else this.#running.set(accountId, { ...this.#start(this.#accounts.for(accountId)), idleSince: undefined });
  }

  /** Every running account not in `busy` starts its idle time; those idle long enough stop. */
  retire(busy: ReadonlySet<string>): void {
    const now = this.#now();
    for (const [accountId, run] of this.#running) {
      if (busy.has(accountId)) continue;
      run.idleSince ??= now;
      if (now - run.idleSince < IDLE_CLOSE_MS) continue;
      this.#running.delete(accountId);
      this.#stop(run);
    }
  }

  #stop(run: AccountRun): Promise<void> {
    run.stopWaits();
    const stopping = (async () => {
      await run.worker.close();
      await run.client.close();
    })().finally(() => this.#stopping.delete(run));
    this.#stopping.set(run, stopping);
    return stopping;
  }

  flow(accountId: string): AccountFlow | undefined {
    return this.#running.get(accountId)?.flow;
  }

  ids(): string[] {
    return [...this.#running.keys()];
  }

  workers(): PlateWorker[] {
    return [...this.#running.values()].map((r) => r.worker);
  }

  clients(): Map<string, UpstreamClient> {
    return new Map([...this.#running].map(([id, r]) => [id, r.client]));
  }

  /** Stops every Worker (letting running jobs finish) and client. */
  async closeAll(): Promise<void> {
    this.#closed = true;
    for (const run of this.#running.values()) this.#stop(run);
    this.#running.clear();
    await Promise.all(this.#stopping.values());
  }

  /** Stops every Worker at once, running jobs or not (a bounded stop that ran out of time). */
  forceAll(): void {
    for (const run of [...this.#running.values(), ...this.#stopping.keys()]) {
      run.stopWaits();
      void run.worker.close(true).catch(() => undefined);
    }
  }
}

// Pages whose batches are all finished change only when new work comes: a batch enqueued, failed
// plates queued again. Both feed an account's queue, and the feed publishes the account on the
// wake channel (queue/feeder.ts). One subscription per process tells every such page, so an open
// page of finished work asks Redis nothing until then (a wait is an event), but for a heartbeat.

/** Subscribes `onWake` (an account id each time) and resolves with what ends the subscription. */
export type ListenWakes = (onWake: (account: string) => void) => Promise<() => void>;

export class WakeNews {
  readonly #listen: ListenWakes;
  readonly #hearers = new Set<(account: string) => void>();
  #opened: Promise<(() => void) | undefined> | undefined;

  constructor(listen: ListenWakes) {
    this.#listen = listen;
  }

  /**
   * Calls `hearer` with each account woken from now until the returned function is called. False
   * when the subscription could not be opened (Redis away): the caller keeps its own timer.
   */
  async hear(hearer: (account: string) => void): Promise<(() => void) | false> {
    this.#opened ??= this.#listen((account) => {
      for (const h of this.#hearers) h(account);
    }).catch(() => undefined);
    const close = await this.#opened;
    if (close === undefined) {
      // Tried again by the next page that needs it.
      this.#opened = undefined;
      return false;
    }
    this.#hearers.add(hearer);
    return () => this.#hearers.delete(hearer);
  }

  /** Ends the subscription (the server stops). */
  async close(): Promise<void> {
    const opened = this.#opened;
    this.#opened = undefined;
    this.#hearers.clear();
    (await opened)?.();
  }
}

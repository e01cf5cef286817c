// The drop folder's failures that are tried again on the next scan (Redis or the disk failing, an
// export that cannot be written): each logged once under a key until its message changes or it
// clears, not on every poll. The last message is shown in the watcher's status.
import type { Logger } from '../logger.js';

export class InboxErrors {
  readonly #log: Logger;
  readonly #messages = new Map<string, string>();
  #last: string | undefined;

  constructor(log: Logger) {
    this.#log = log;
  }

  /** The latest failure's message (kept after it clears, like the last line of a log). */
  get last(): string | undefined {
    return this.#last;
  }

  /** Whether a failure under this key is logged and not yet cleared. */
  has(key: string): boolean {
    return this.#messages.has(key);
  }

  /** The thing under this key worked: its next failure is logged again. */
  clear(key: string): void {
    this.#messages.delete(key);
  }

  /** Logs a repeated failure once until it changes or clears. */
  report(key: string, err: unknown, fields: Record<string, unknown>): void {
    const message = err instanceof Error ? err.message : String(err);
    this.#last = message;
    if (this.#messages.get(key) === message) return;
    this.#messages.set(key, message);
    this.#log.error({ ...fields, err }, `inbox: ${message} (will retry)`);
  }
}

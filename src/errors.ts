// One base class for every error vqb raises on purpose. Each subclass has a stable `code` that
// logs, stored outcomes and API responses carry, so callers branch on `code`, never on messages.
//
// One way to tell what an error is: a brand. Every class declares `static brand =
// Symbol.for('vqb.error.<Name>')`, and an instance carries the brands of its class and of every
// class above it, so `isError(e, InputError)` holds for an InputError and `isError(e, VqbError)`
// for any vqb error, even when two copies of the package are loaded (the reason undici brands its
// errors). No `instanceof`, no name strings, no message patterns.
import type { ErrorCode } from './error-codes.js';

export class VqbError extends Error {
  static readonly brand: symbol = Symbol.for('vqb.error.VqbError');
  readonly code: string;

  /** `code` is an entry of the one error table (src/error-codes.ts): its HTTP status and exit code live there. */
  constructor(code: ErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'VqbError';
    this.code = code;
    for (
      let cls = new.target as unknown;
      typeof cls === 'function' && cls !== Error;
      cls = Object.getPrototypeOf(cls)
    ) {
      const brand = (cls as { brand?: unknown }).brand;
      if (typeof brand === 'symbol' && Object.hasOwn(cls as object, 'brand'))
        Object.defineProperty(this, brand, { value: true });
    }
  }
}

/** True when `value` is an instance of `cls` (or of a class below it), by brand. */
export function isError<T extends VqbError>(value: unknown, cls: abstract new (...args: never[]) => T): value is T {
  const brand = (cls as unknown as { brand: symbol }).brand;
  return typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[brand] === true;
}

export function isVqbError(value: unknown): value is VqbError {
  return isError(value, VqbError);
}

/** A setting is missing or malformed; start-up stops with one line naming the variable. */
export class ConfigError extends VqbError {
  static override readonly brand: symbol = Symbol.for('vqb.error.ConfigError');
  readonly variable: string;

  constructor(variable: string, expected: string) {
    super('CONFIG_INVALID', `${variable}: ${expected}`);
    this.name = 'ConfigError';
    this.variable = variable;
  }
}

/** A pool declared wrong in the accounts file (members of other products or owners): refused at load. */
export class PoolError extends VqbError {
  static override readonly brand: symbol = Symbol.for('vqb.error.PoolError');
  readonly pool: string;

  constructor(pool: string, source: string, problem: string) {
    super('POOL_INVALID', `${source}: pool ${pool}: ${problem}`);
    this.name = 'PoolError';
    this.pool = pool;
  }
}

/** A command was used wrongly (unknown flag, missing argument). */
export class UsageError extends VqbError {
  static override readonly brand: symbol = Symbol.for('vqb.error.UsageError');
  constructor(message: string) {
    super('USAGE', message);
    this.name = 'UsageError';
  }
}

/**
 * A request whose account was paused or held while it waited to be sent (its slot given up for
 * lateness, and the next one refused): nothing was sent. The worker gives its create back and
 * puts the job back for the pause, rather than wait in the Worker until someone resumes.
 */
export class StoppedBeforeSendError extends VqbError {
  static override readonly brand: symbol = Symbol.for('vqb.error.StoppedBeforeSendError');
  constructor(account: string) {
    super('ACCOUNT_STOPPED', `account ${account} was paused or held before the request was sent; nothing was sent`);
    this.name = 'StoppedBeforeSendError';
  }
}

/** Redis could not be reached or refused our commands. */
export class RedisUnavailableError extends VqbError {
  static override readonly brand: symbol = Symbol.for('vqb.error.RedisUnavailableError');
  constructor(url: string, cause?: unknown, setting = 'REDIS_URL') {
    super('REDIS_UNAVAILABLE', `cannot reach Redis at ${url} (set ${setting})`, { cause });
    this.name = 'RedisUnavailableError';
  }
}

/**
 * Redis refused a write because it reached its maxmemory (policy noeviction). Nothing of the
 * refused step was stored (ingest writes each chunk in one transaction), so running the same
 * command again, once Redis has room, resumes where this one stopped.
 */
export class RedisFullError extends VqbError {
  static override readonly brand: symbol = Symbol.for('vqb.error.RedisFullError');
  constructor(what: string, cause?: unknown) {
    super(
      'REDIS_FULL',
      `Redis is full (used memory reached maxmemory) while ${what}; nothing of the refused step was ` +
        `stored: raise maxmemory (CONFIG SET maxmemory …) or free memory, then run the same command again to resume`,
      { cause },
    );
    this.name = 'RedisFullError';
  }
}

/**
 * A paid write (an outcome, a query id) that no replica acknowledged in time, or that was
 * acknowledged over a connection other than the one that wrote it (a failover between the two):
 * the primary that took it may be replaced without it. The write is made again until a replica
 * holds it (workers/recorder.ts); the wait is said as Redis being down.
 */
export class RedisUnreplicatedError extends VqbError {
  static override readonly brand: symbol = Symbol.for('vqb.error.RedisUnreplicatedError');
  constructor(acked: number, wanted: number, timeoutMs: number, reconnected: boolean) {
    super(
      'REDIS_UNREPLICATED',
      reconnected
        ? 'the connection to the Redis primary changed while a paid write was confirmed (a failover): ' +
            'it is written again on the primary now'
        : `${acked} of ${wanted} replica(s) acknowledged a paid write within ${timeoutMs} ms (WAIT): it is ` +
            'held and written again until one does; bring the replica back, or set VQ_REDIS_REPLICA_ACKS=0 ' +
            'if this primary has none (a failover could then lose results)',
    );
    this.name = 'RedisUnreplicatedError';
  }
}

/** A batch id that Redis does not know. */
export class BatchNotFoundError extends VqbError {
  static override readonly brand: symbol = Symbol.for('vqb.error.BatchNotFoundError');
  constructor(batchId: string) {
    super('BATCH_NOT_FOUND', `no batch with id ${batchId}`);
    this.name = 'BatchNotFoundError';
  }
}

/**
 * A batch id that several accounts hold (an id is scoped by its account), looked up without saying
 * which (an administrator's token, the CLI): that account's token finds its own.
 */
export class BatchAmbiguousError extends VqbError {
  static override readonly brand: symbol = Symbol.for('vqb.error.BatchAmbiguousError');
  readonly accounts: readonly string[];
  constructor(batchId: string, accounts: readonly string[]) {
    super(
      'BATCH_ID_AMBIGUOUS',
      `batch id ${batchId} is held by several accounts (${accounts.join(', ')}): name the account ` +
        `(\`--account A\` on the command line; the API and the console: that account's service token)`,
    );
    this.name = 'BatchAmbiguousError';
    this.accounts = accounts;
  }
}

/**
 * A batch id named explicitly (API/library `batchId`, `vqb run --batch-id`) that an existing batch
 * with other content holds: nothing is queued (the same content again is the same batch).
 */
export class BatchIdTakenError extends VqbError {
  static override readonly brand: symbol = Symbol.for('vqb.error.BatchIdTakenError');
  constructor(batchId: string) {
    super(
      'BATCH_ID_TAKEN',
      `batch id ${batchId} is taken by a batch with other content; send that content to resume it, ` +
        `or another batchId (or none: the id is then derived from the content)`,
    );
    this.name = 'BatchIdTakenError';
  }
}

/** Input that cannot be read as plates (not CSV, unknown column, too large). */
export class InputError extends VqbError {
  static override readonly brand: symbol = Symbol.for('vqb.error.InputError');
  constructor(code: ErrorCode, message: string, options?: { cause?: unknown }) {
    super(code, message, options);
    this.name = 'InputError';
  }
}

/** Options a function does not take (a typo such as `metadat`) or of the wrong type; nothing was stored or sent. */
export class OptionsError extends VqbError {
  static override readonly brand: symbol = Symbol.for('vqb.error.OptionsError');
  constructor(message: string) {
    super('BAD_OPTIONS', message);
    this.name = 'OptionsError';
  }
}

/** A delete or prune of a batch whose plates are still running (pass cancel to stop it first). */
export class BatchRunningError extends VqbError {
  static override readonly brand: symbol = Symbol.for('vqb.error.BatchRunningError');
  constructor(batchId: string, detail: string) {
    super(
      'BATCH_RUNNING',
      `batch ${batchId} is still running (${detail}); wait for it to finish, or cancel it (vqb ` +
        `delete --cancel, DELETE …?cancel=true)`,
    );
    this.name = 'BatchRunningError';
  }
}

/**
 * A batch's archive could not be written or did not read back as written: nothing of the batch
 * was deleted from Redis, and the message says why.
 */
export class ArchiveError extends VqbError {
  static override readonly brand: symbol = Symbol.for('vqb.error.ArchiveError');
  constructor(batchId: string, why: string, options?: { cause?: unknown }) {
    super('ARCHIVE_FAILED', `batch ${batchId} was not archived, nothing was deleted: ${why}`, options);
    this.name = 'ArchiveError';
  }
}

/**
 * Content whose batch was archived and deleted from Redis (retention) sent again: nothing is
 * queued, so nothing is paid twice; its results are served from the archive.
 */
export class BatchArchivedError extends InputError {
  static override readonly brand: symbol = Symbol.for('vqb.error.BatchArchivedError');
  constructor(batchId: string) {
    // An InputError: the drop folder moves such a file to failed/ with the reason, instead of retrying it.
    super(
      'BATCH_ARCHIVED',
      `batch ${batchId} (this same content) was archived: its results are in the archive (vqb ` +
        `export ${batchId}, GET /v1/batches/${batchId}/results); send it with force to look the ` +
        `plates up again (a new charge each)`,
    );
    this.name = 'BatchArchivedError';
  }
}

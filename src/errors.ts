// One base class for every error vqb raises on purpose. Each subclass has a stable `code` that
// logs, stored outcomes and API responses carry, so callers branch on `code`, never on messages.
// `isVqbError` uses a registry symbol so the check still works when two copies of the package are
// loaded (the same reason undici brands its errors).

const kVqbError = Symbol.for('vqb.error');

export class VqbError extends Error {
  readonly code: string;

  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'VqbError';
    this.code = code;
    Object.defineProperty(this, kVqbError, { value: true });
  }
}

export function isVqbError(value: unknown): value is VqbError {
  return typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[kVqbError] === true;
}

/** A setting is missing or malformed; start-up stops with one line naming the variable. */
export class ConfigError extends VqbError {
  readonly variable: string;

  constructor(variable: string, expected: string) {
    super('CONFIG_INVALID', `${variable}: ${expected}`);
    this.name = 'ConfigError';
    this.variable = variable;
  }
}

/** A command was used wrongly (unknown flag, missing argument). */
export class UsageError extends VqbError {
  constructor(message: string) {
    super('USAGE', message);
    this.name = 'UsageError';
  }
}

/** Redis could not be reached or refused our commands. */
export class RedisUnavailableError extends VqbError {
  constructor(url: string, cause?: unknown) {
    super('REDIS_UNAVAILABLE', `cannot reach Redis at ${url} (set REDIS_URL)`, { cause });
    this.name = 'RedisUnavailableError';
  }
}

/** A batch id that Redis does not know. */
export class BatchNotFoundError extends VqbError {
  constructor(batchId: string) {
    super('BATCH_NOT_FOUND', `no batch with id ${batchId}`);
    this.name = 'BatchNotFoundError';
  }
}

/** Input that cannot be read as plates (not CSV, unknown column, too large). */
export class InputError extends VqbError {
  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(code, message, options);
    this.name = 'InputError';
  }
}

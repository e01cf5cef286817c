// pino JSON logs. Redaction is belt and braces: the key is never put in a log object on purpose,
// but if a request, header set or config ever is, these paths are censored.
import { type DestinationStream, type Logger, pino } from 'pino';
import { logIds } from './telemetry/index.js';

export type { Logger } from 'pino';

export const REDACT_PATHS = [
  'apiKey',
  'key',
  'headers["x-api-key"]',
  'req.headers["x-api-key"]',
  'req.headers.authorization',
  'headers.authorization',
  '*.headers.authorization',
  'request.headers["x-api-key"]',
  'config.apiKey',
  '*.apiKey',
  '*.headers["x-api-key"]',
  'token',
  '*.token',
];

/**
 * A logger that writes nothing: the library's when the application gives none (its stdout and
 * stderr are the application's, not ours to fill with JSON lines).
 */
export function silentLogger(): Logger {
  return pino({ enabled: false });
}

export function createLogger(options: { level?: string; name?: string } = {}, destination?: DestinationStream): Logger {
  return pino(
    {
      name: options.name ?? 'vqb',
      level: options.level ?? 'info',
      redact: { paths: REDACT_PATHS, censor: '[redacted]' },
      timestamp: pino.stdTimeFunctions.isoTime,
      base: { pid: process.pid },
      // trace_id and span_id while a span is active (tracing on: src/telemetry/); nothing otherwise.
      mixin: logIds,
    },
    destination ?? pino.destination({ dest: 2, sync: false }),
  );
}

const LEVELS = new Set(['fatal', 'error', 'warn', 'info', 'debug', 'trace']);
const silent = () => {};

/**
 * `parent.child(bindings)`, made when first written to: a job's logger is made for every
 * activation and used by few (a cold batch at info writes no line a plate), and a child's bindings
 * are serialized and redacted when it is made (0.8 % of the samples of a V8 profile of a cold
 * batch's worker). A level the parent does not write is a no-op without making the child.
 */
export function lazyChild(parent: Logger, bindings: () => Record<string, unknown>): Logger {
  let child: Logger | undefined;
  const made = () => {
    child ??= parent.child(bindings());
    return child;
  };
  return new Proxy(parent, {
    get(_target, property) {
      if (
        child === undefined &&
        typeof property === 'string' &&
        LEVELS.has(property) &&
        !parent.isLevelEnabled(property)
      )
        return silent;
      const logger = made();
      const value = Reflect.get(logger, property, logger);
      return typeof value === 'function' ? value.bind(logger) : value;
    },
    // A level set is the child's, as on any child; never the parent's (the proxy's target).
    set(_target, property, value) {
      return Reflect.set(made(), property, value);
    },
  });
}

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

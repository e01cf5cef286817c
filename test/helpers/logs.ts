// Logs in tests go to a captured stream parsed as JSON lines, so tests can assert on decisions
// (paused, resumed, failed) and on what must never appear (the API key).
import { Writable } from 'node:stream';
import { createLogger, type Logger } from '../../src/logger.js';

export interface CapturedLogs {
  logger: Logger;
  lines: Record<string, unknown>[];
  text(): string;
}

export function captureLogs(level = 'debug'): CapturedLogs {
  const raw: string[] = [];
  const lines: Record<string, unknown>[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString('utf8').split('\n')) {
        if (line.trim() === '') continue;
        raw.push(line);
        lines.push(JSON.parse(line) as Record<string, unknown>);
      }
      done();
    },
  });
  return { logger: createLogger({ level, name: 'test' }, stream), lines, text: () => raw.join('\n') };
}

import { type Config, loadConfig, type Overrides } from '../../src/config.js';
import { REDIS_URL } from './redis.js';

/** A Config as `vqb` would build it, scaled down for tests: fast polls, short locks. */
export function testConfig(prefix: string, overrides: Overrides = {}): Config {
  return loadConfig(
    {},
    {
      REDIS_URL,
      VQ_PREFIX: prefix,
      VQ_RATE_LIMIT: '50/s',
      VQ_CONCURRENCY: '8',
      VQ_POLL_INITIAL: '300ms',
      VQ_POLL_INTERVAL: '150ms',
      VQ_POLL_MAX_INTERVAL: '1s',
      VQ_POLL_DEADLINE: '30s',
      VQ_BACKOFF: '100ms',
      VQ_LOCK_DURATION: '5s',
      VQ_STALLED_INTERVAL: '2s',
      VQ_REQUEST_TIMEOUT: '5s',
      LOG_LEVEL: 'debug',
      // The exports as scripts read them, in English: the tests that read exports by their raw
      // columns are about something else; the readable layout and the languages have their own
      // (test/unit/readable-export.test.ts, test/integration/demo.test.ts).
      VQ_EXPORT_LAYOUT: 'raw',
      VQ_LANG: 'en',
      ...overrides,
    },
  );
}

// The chaos suite: long, process-heavy, run on its own (npm run build first: it spawns bin/vqb.js).
//   npx vitest run --config test/chaos/vitest.config.ts                  CI size (~300 plates)
//   CHAOS_FULL=1 npx vitest run --config test/chaos/vitest.config.ts     1,000 plates, ≥ 10 kills
//   CHAOS_SEED=123 …                                                     replay a schedule
//   CHAOS_LOG_DIR=/tmp/chaos-logs …                                      keep every vqb process's output
import { resolve } from 'node:path';
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    root: resolve(import.meta.dirname, '../..'),
    include: ['test/chaos/**/*.test.ts'],
    fileParallelism: false,
    // The chaos file skips itself unless this is set, so the main config may include it harmlessly.
    env: { VQB_CHAOS: '1' },
    testTimeout: 20 * 60_000,
    hookTimeout: 120_000,
  },
});

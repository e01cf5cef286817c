// The fault suite: long, process-heavy, run on its own (npm run build first: it spawns bin/vqb.js).
//   npx vitest run --config test/faults/vitest.config.ts                 CI size (~300 plates)
//   FAULTS_FULL=1 npx vitest run --config test/faults/vitest.config.ts   1,000 plates, more pauses
//   FAULTS_SEED=123 …   replay a schedule        FAULTS_LOG_DIR=/tmp/fault-logs …   keep every log
import { resolve } from 'node:path';
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    root: resolve(import.meta.dirname, '../..'),
    include: ['test/faults/**/*.test.ts'],
    fileParallelism: false,
    // The fault file skips itself unless this is set, so the main config may include it harmlessly.
    env: { VQB_FAULTS: '1' },
    testTimeout: 20 * 60_000,
    hookTimeout: 120_000,
  },
});

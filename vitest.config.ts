import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // The chaos and fault suites have their own configs and commands (npm run test:chaos, test:faults).
    exclude: ['test/chaos/**', 'test/faults/**', 'node_modules/**'],
    // Integration files share one Redis server; each uses its own prefix, but running files
    // one at a time keeps timing-sensitive pacing tests honest on a 2-core machine.
    fileParallelism: false,
    testTimeout: 60_000,
    hookTimeout: 30_000,
  },
});

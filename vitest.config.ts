import { defineConfig } from 'vitest/config';

/**
 * The files whose assertions are rates and times (a key used at ≥ 0.9 of its limit, a batch done
 * before its deadline, a hold followed within so long): the lane `paced`. `npm test` runs the two
 * lanes at once (test/lanes.mjs): this one a file at a time, so two of these never share the
 * machine; `rest` is everything else (the browser, clusters, the CLI), mostly waiting, three files
 * at a time.
 */
const PACED = [
  'test/integration/learned-rate.test.ts',
  'test/integration/scheduling.test.ts',
  'test/integration/first-batch-cost.test.ts',
  'test/integration/idle-accounts.test.ts',
  'test/integration/scale-out.test.ts',
  'test/integration/deadlines.test.ts',
  'test/integration/worker-limits.test.ts',
  'test/integration/key-pools.test.ts',
  'test/integration/metrics.test.ts',
  'test/integration/watch-rounds.test.ts',
  'test/integration/poll-learner.test.ts',
  'test/integration/upstream-client.test.ts',
];
// The chaos and fault suites have their own configs and commands (npm run test:chaos, test:faults).
const ELSEWHERE = ['test/chaos/**', 'test/faults/**', 'node_modules/**'];

export default defineConfig({
  test: {
    // Integration files share one Redis server, each with its own prefix. One file at a time unless
    // asked (test/lanes.mjs asks it of `rest`), which keeps timing-sensitive pacing tests honest.
    fileParallelism: false,
    testTimeout: 60_000,
    hookTimeout: 30_000,
    // Lists each test that passed only on a retry, with its first error (the paced lane's).
    reporters: ['default', './test/helpers/retried-reporter.ts'],
    projects: [
      // Rates and times on a shared machine: a test that fails once is run once more (a fresh
      // harness and prefix) and named at the end; failing twice fails the lane.
      { extends: true, test: { name: 'paced', include: PACED, retry: 1 } },
      { extends: true, test: { name: 'rest', include: ['test/**/*.test.ts'], exclude: [...ELSEWHERE, ...PACED] } },
    ],
  },
});

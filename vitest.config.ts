import { defineConfig } from 'vitest/config';

/**
 * One run, four files at a time, no retry. Each integration file has its own Redis prefix,
 * simulator, ports and temp dirs, and the suite mostly waits (child processes, servers, timers), so
 * four files fill a 2-core machine. No test asserts a rate, a share or a latency on the wall clock
 * (those are the bench's and the cold gate's): what a test checks holds however busy the machine is.
 */
// The chaos and fault suites have their own configs and commands (npm run test:chaos, test:faults).
const ELSEWHERE = ['test/chaos/**', 'test/faults/**', 'node_modules/**'];

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    exclude: ELSEWHERE,
    fileParallelism: true,
    maxWorkers: Number(process.env.VQ_TEST_WORKERS ?? 4),
    testTimeout: 60_000,
    hookTimeout: 30_000,
  },
});

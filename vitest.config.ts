import { defineConfig } from 'vitest/config';

/**
 * `npm test`: test/unit and test/integration in one run, five files at a time, no retry. Each
 * integration file has its own Redis prefix, simulator, ports and temp dirs, and the suite mostly
 * waits (child processes, servers, timers), so five files fill a 2-core machine. No test asserts a
 * rate, a share or a latency on the wall clock (those are the bench's and the cold gate's): what a
 * test checks holds however busy the machine is.
 *
 * `isolate: false`: the files a vitest worker runs share its module cache, so fastify, BullMQ,
 * ioredis, zod's schemas and vqb itself are loaded once a worker, not once a file. Loading them
 * per file was about half the suite's CPU: 663 s of CPU and 6 min 39 s on a 2-core machine, 351 s
 * and 4 min 22 s without (134 files, all passing; two of them also seed smaller batches, about
 * 28 s of the CPU saved). It holds because no test mocks a module,
 * stubs a global, sets a global dispatcher or changes process.env: each file's state is its
 * harness's (its own Redis prefix, simulator, ports, temp dirs, loggers), built and closed by it.
 */
// Tiers with configs and commands of their own: topology and browser (npm run test:topology),
// chaos (test:chaos), faults (test:faults). `.ci/run` runs them all.
const ELSEWHERE = ['test/topology/**', 'test/browser/**', 'test/chaos/**', 'test/faults/**', 'node_modules/**'];

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    exclude: ELSEWHERE,
    fileParallelism: true,
    isolate: false,
    maxWorkers: Number(process.env.VQ_TEST_WORKERS ?? 5),
    testTimeout: 60_000,
    hookTimeout: 30_000,
  },
});

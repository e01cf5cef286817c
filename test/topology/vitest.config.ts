// The topology tier (`npm run test:topology`; `.ci/run` runs it after `npm test`): what needs
// Redis servers of its own or a browser, each file starting its own processes (npm run build
// first: some spawn bin/vqb.js):
//   test/topology/   Sentinel, Cluster, TLS, a full Redis, a frozen or gone Redis, the 0.1.0 layout
//                    migration, 200 MB uploads
//   test/browser/    the console in Debian's Chromium
// Three files at a time: each starts redis-servers or a Chromium, heavier than an integration file.
import { resolve } from 'node:path';
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    root: resolve(import.meta.dirname, '../..'),
    include: ['test/topology/**/*.test.ts', 'test/browser/**/*.test.ts'],
    fileParallelism: true,
    maxWorkers: Number(process.env.VQ_TEST_WORKERS ?? 3),
    testTimeout: 60_000,
    hookTimeout: 30_000,
  },
});

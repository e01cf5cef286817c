// The README's first command: a whole batch against the simulator, end to end, in under a minute.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Command } from '../cli.js';
import { connectRedis, deleteKeysByPrefix, preflightRedis } from '../queue/redis.js';
import { startSimulator } from '../simulator/index.js';
import { runFile } from './run.js';

const SAMPLES = fileURLToPath(new URL('../../../samples/', import.meta.url));
const DEMO_PREFIX = '{vqb-demo}';

export const demoCommand: Command = {
  summary: 'run a sample batch (samples/plates.csv) against a local simulator, end to end',
  usage: `vqb demo [--out DIR] [--file CSV]
  Starts the upstream simulator on a free port (key demo-key, 40 requests/s, queries taking
  1–3 s, the plates in samples/fail-plates.txt failing upstream), checks Redis, runs
  \`vqb run\` on the sample CSV under the Redis prefix ${DEMO_PREFIX} (cleared first, so the demo
  always pays its simulated creates afresh) and prints where the exports are.`,
  options: { file: { type: 'string' } },
  async run(ctx) {
    const failPlates = readFileSync(`${SAMPLES}fail-plates.txt`, 'utf8').split(/\s+/).filter(Boolean);
    const sim = await startSimulator({ rateLimit: '40/s', window: 'sliding', completionMs: [1_000, 3_000], failPlates });
    try {
      const config = ctx.configWith({
        VQ_BASE_URL: sim.url,
        VQ_API_KEY: 'demo-key',
        VQ_PREFIX: DEMO_PREFIX,
        VQ_RATE_LIMIT: '40/s',
        VQ_POLL_INITIAL: '2s',
        VQ_POLL_INTERVAL: '500ms',
        VQ_CONCURRENCY: '8',
      });
      const redis = connectRedis(config.redisUrl, { failFast: true });
      try {
        await preflightRedis(redis, config, (message) => ctx.io.stderr.write(`vqb: warning: ${message}\n`));
        // Only the demo's own keys: a user's real queues under other prefixes are never touched.
        await deleteKeysByPrefix(redis, `${DEMO_PREFIX}:`);
      } finally {
        redis.disconnect();
      }
      ctx.print(`simulator on ${sim.url}; Redis at ${config.redisUrl}; limit ${config.rateLimit.text}`);
      const file = typeof ctx.flags.file === 'string' ? ctx.flags.file : `${SAMPLES}plates.csv`;
      const outcome = await runFile(ctx, config, file, {});
      const s = sim.stats();
      ctx.print(`upstream (simulated): ${s.creates} creates, ${s.gets} polls, ${s.rateLimited} answered 429, max ${s.maxInWindow} requests in any 1 s window`);
      return outcome.code;
    } finally {
      await sim.close();
    }
  },
};

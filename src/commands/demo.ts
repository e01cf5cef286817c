// The README's first command: a whole batch against the simulator, end to end, in under a minute.
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { isVqbError, VqbError } from '../errors.js';
import { connectRedis, deleteKeysByPrefix, preflightRedis } from '../redis/connection.js';
import { INSTALL_HINT, probePort, startThrowawayRedis } from '../redis/server.js';
import { startSimulator } from '../simulator/index.js';
import type { Command, CommandContext } from './command.js';
import { runFile } from './run.js';

// samples/ beside package.json: three folders up from the compiled dist/src/commands/, two from
// src/commands/ (a test runs the command in its own process, from the sources).
// Neither there: the installed package's place, which a read then names in its ENOENT.
const SAMPLE_DIRS = ['../../../samples/', '../../samples/'].map((up) => fileURLToPath(new URL(up, import.meta.url)));
const SAMPLES = SAMPLE_DIRS.find((dir) => existsSync(`${dir}plates.csv`)) ?? SAMPLE_DIRS[0]!;
const DEMO_PREFIX = '{vqb-demo}';

export const demoCommand: Command = {
  handlesStop: true,
  usage: `vqb demo [--out DIR] [--file CSV]
  Starts the upstream simulator on a free port (key demo-key, 40 requests/s, queries taking
  1–3 s, the plates in samples/fail-plates.txt failing upstream), checks Redis, runs
  \`vqb run\` on the sample CSV under the Redis prefix ${DEMO_PREFIX} (cleared first, so the demo
  always pays its simulated creates afresh) and prints where the exports are, and how to look at
  the batch afterwards (\`vqb status <batch> --prefix '${DEMO_PREFIX}'\`). Its batch ids start
  with demo-: a demo of your own file (--file) never replaces the exports of its real batch.
  When REDIS_URL is not set and nothing listens on the default address, the demo starts a
  throwaway redis-server (free port, temporary directory, nothing saved) and stops it at the end.`,
  options: { file: { type: 'string' } },
  async run(ctx) {
    const redisServer = await demoRedis(ctx);
    try {
      return await runDemo(ctx, redisServer.url, redisServer.throwaway === true);
    } finally {
      await redisServer.close();
    }
  },
};

async function runDemo(ctx: CommandContext, redisUrl: string | undefined, throwaway: boolean): Promise<number> {
  const failPlates = readFileSync(`${SAMPLES}fail-plates.txt`, 'utf8').split(/\s+/).filter(Boolean);
  const sim = await startSimulator({ rateLimit: '40/s', window: 'sliding', completionMs: [1_000, 3_000], failPlates });
  try {
    const config = ctx.configWith({
      ...(redisUrl !== undefined ? { REDIS_URL: redisUrl } : {}),
      VQ_BASE_URL: sim.url,
      VQ_API_KEY: 'demo-key',
      VQ_PREFIX: DEMO_PREFIX,
      VQ_RATE_LIMIT: '40/s',
      VQ_POLL_INITIAL: '2s',
      VQ_POLL_INTERVAL: '500ms',
      VQ_CONCURRENCY: '8',
    });
    const redis = connectRedis(config.redis, { failFast: true });
    try {
      await preflightRedis(redis, config, (message) => ctx.io.stderr.write(`vqb: warning: ${message}\n`));
      // Only the demo's own keys: a user's real queues under other prefixes are never touched.
      await deleteKeysByPrefix(redis, `${DEMO_PREFIX}:`);
    } finally {
      redis.disconnect();
    }
    ctx.print(`simulator on ${sim.url}; Redis at ${config.redis.display}; limit ${config.rateLimit.text}`);
    const file = typeof ctx.flags.file === 'string' ? ctx.flags.file : `${SAMPLES}plates.csv`;
    // Its own batch id as well as its own prefix: the exports of a demo of a file never replace
    // those of the real batch of that file in the same out folder.
    const outcome = await runFile(ctx, config, file, { batchIdPrefix: 'demo-', confirmed: true });
    const s = sim.stats();
    ctx.print(
      `upstream (simulated): ${s.creates} creates, ${s.gets} polls, ${s.rateLimited} answered 429, ` +
        `max ${s.maxInWindow} requests in any 1 s window`,
    );
    const look = lookAtIt(outcome.batchId, throwaway);
    if (look !== undefined) ctx.print(look);
    return outcome.code;
  } finally {
    await sim.close();
  }
}

/**
 * Where the demo's batch can be seen afterwards. It lives under its own prefix (so a demo never
 * mixes with real batches, and starts afresh each time): the line says how, to copy as it is.
 */
function lookAtIt(batchId: string, throwaway: boolean): string | undefined {
  // A throwaway Redis said at the start that the batch goes with it.
  if (throwaway) return undefined;
  const prefix = `--prefix '${DEMO_PREFIX}'`;
  return `to look at this batch later: vqb status ${batchId} ${prefix} (in the console: vqb serve ${prefix})`;
}

/**
 * The demo's Redis: the one the settings name or, when they name none and nothing listens on the
 * default address, a throwaway redis-server of its own. `url` is undefined when the settings say.
 */
async function demoRedis(ctx: CommandContext): Promise<{ url?: string; throwaway?: boolean; close(): Promise<void> }> {
  const named =
    (ctx.io.env.REDIS_URL ?? '') !== '' ||
    ctx.flags['redis-url'] !== undefined ||
    ((ctx.flags.set as string[] | undefined) ?? []).some((p) => p.startsWith('REDIS_URL='));
  const none = { close: async () => {} };
  if (named) return none;
  // Tests point "the default" at an address with nothing on it (6379 is the shared test Redis).
  const defaultUrl = ctx.io.env.VQB_TEST_DEFAULT_REDIS_URL ?? ctx.config().redisUrl;
  const { hostname, port } = new URL(defaultUrl);
  const where = `${hostname}:${port || 6379}`;
  if ((await probePort(hostname.replace(/^\[|\]$/g, ''), Number(port || 6379))) !== 'refused')
    return { url: defaultUrl, close: none.close };
  try {
    // Looked up on the command's PATH (its environment, as main() was handed it).
    const server = await startThrowawayRedis({ path: ctx.io.env.PATH });
    ctx.print(
      `no Redis on ${where}: started a throwaway redis-server on ${server.url} ` +
        "(stopped and deleted when the demo ends, the demo's batch with it; the exports stay)",
    );
    return { url: server.url, throwaway: true, close: () => server.close() };
  } catch (err) {
    if (isVqbError(err) && err.code === 'REDIS_SERVER_MISSING') {
      throw new VqbError(
        'REDIS_UNAVAILABLE',
        `no Redis on ${where} and redis-server is not installed: \`${INSTALL_HINT}\` (or set REDIS_URL)`,
      );
    }
    throw err;
  }
}

// vqb as the bench runs it: one or more `vqb work` children, configured by environment as in
// production, and a producer in this process (`createVqb`, no workers) that enqueues through the
// library API and reads batches and outcomes back; all under one fresh `{vqbbench-…}` prefix.
// With several accounts, a VQ_ACCOUNTS_FILE is written for the run. Stopping ends the workers
// and the producer and removes the file and every key under the prefix.
// Warm: every account has met its upstream before (the shape of its answers is stored, as on every
// run of a deployment after its first), so a scenario measures the pace, not first contact;
// bench/cold.ts measures the cold start, from an empty Redis.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../src/config.js';
import { createVqb, type Overrides, type Vqb } from '../src/index.js';
import { openQueueServices } from '../src/services.js';
import { benchPrefix, deleteByPrefix, REDIS_URL } from './common.js';
import { startWorkerChild, type WorkerChild } from './procs.js';
import type { StepContext } from './upstream.js';

/** One account of the run: its id, the simulator key it sends, and its configured limit. */
export interface BenchAccount {
  id: string;
  key: string;
  rateLimit: string;
}

export interface FleetSpec {
  label: string;
  /** `vqb work` processes. */
  workers: number;
  /** Base URL of the simulator the workers call. */
  upstreamUrl: string;
  /** One account: the environment's `default` (VQ_API_KEY, VQ_RATE_LIMIT); several: VQ_ACCOUNTS_FILE. */
  accounts: BenchAccount[];
}

export interface Fleet {
  prefix: string;
  /** The producer: enqueue, batches, outcomes (services.outcomes.scan). */
  vqb: Vqb;
  workers: WorkerChild[];
  /** User + system CPU seconds of every worker since the fleet started. */
  cpuSeconds(): number;
  /** The workers' log lines by message, summed over the processes ("worker started" left out). */
  workerLog(): Record<string, number>;
  stop(): Promise<void>;
}

export async function startFleet(ctx: StepContext, spec: FleetSpec): Promise<Fleet> {
  const prefix = benchPrefix(spec.label);
  let dir: string | undefined;
  const settings: Record<string, string> = { REDIS_URL, VQ_PREFIX: prefix, VQ_BASE_URL: spec.upstreamUrl };
  const only = spec.accounts.length === 1 ? spec.accounts[0]! : undefined;
  if (only && only.id === 'default') {
    settings.VQ_API_KEY = only.key;
    settings.VQ_RATE_LIMIT = only.rateLimit;
  } else {
    dir = await mkdtemp(join(tmpdir(), 'vqb-bench-accounts-'));
    const file = join(dir, 'accounts.json');
    await writeFile(
      file,
      JSON.stringify({ accounts: spec.accounts.map((a) => ({ id: a.id, apiKey: a.key, rateLimit: a.rateLimit })) }),
    );
    settings.VQ_ACCOUNTS_FILE = file;
  }
  const cleanup = async () => {
    const removed = await deleteByPrefix(ctx.redis, prefix);
    if (dir) await rm(dir, { recursive: true, force: true });
    ctx.log(`    removed ${removed} keys under ${prefix}`);
  };
  const workers: WorkerChild[] = [];
  let vqb: Vqb | undefined;
  try {
    const services = await openQueueServices(loadConfig({}, { ...settings, LOG_LEVEL: 'silent' }));
    try {
      for (const a of spec.accounts)
        await services.answers.learn(a.id, { id: '/body/queryId', status: '/body/status' }, Date.now());
    } finally {
      await services.close();
    }
    // One at a time: a process's start-up is CPU-bound, and the bench has two cores.
    for (let i = 0; i < spec.workers; i++) workers.push(await startWorkerChild({ ...settings, LOG_LEVEL: 'info' }));
    vqb = await createVqb({ env: {}, settings: { ...settings, LOG_LEVEL: 'silent' } as Overrides, workers: false });
  } catch (err) {
    await Promise.allSettled(workers.map((w) => w.stop()));
    await vqb?.close();
    await cleanup();
    throw err;
  }
  const producer = vqb;
  const cpu0 = workers.map((w) => w.cpuSeconds());
  return {
    prefix,
    vqb: producer,
    workers,
    cpuSeconds: () => workers.reduce((sum, w, i) => sum + w.cpuSeconds() - cpu0[i]!, 0),
    workerLog() {
      const out: Record<string, number> = {};
      for (const w of workers) {
        for (const [msg, n] of w.messages) if (!msg.endsWith('worker started')) out[msg] = (out[msg] ?? 0) + n;
      }
      return out;
    },
    async stop() {
      await Promise.allSettled(workers.map((w) => w.stop()));
      await producer.close();
      await cleanup();
    },
  };
}

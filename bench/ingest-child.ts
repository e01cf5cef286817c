// One ingest measurement in a process of its own, so the peak RSS is the ingest's alone:
//   vqb:   the real path of `vqb run` — readPlateCsv on a file stream, then ingest() into a batch;
//   raw:   BullMQ queue.addBulk of the same jobs (same data, same options, chunks of 1,000), the
//          floor any producer on BullMQ pays;
//   read:  readPlateCsv alone over the same file, every row read and dropped (no Redis);
//   dedup: the PlateDeduper ingest uses, fed `rows` distinct plates; its heap after a full
//          collection, minus before, is what the table keeps per plate.
// Forked by the bench with {type:'start', job}; answers {type:'result'}. No workers run.
import { createReadStream } from 'node:fs';
import { basename } from 'node:path';
import { performance } from 'node:perf_hooks';
import { pathToFileURL } from 'node:url';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { loadConfig } from '../src/config.js';
import { readPlateCsv } from '../src/producers/csv.js';
import { PlateDeduper } from '../src/producers/dedup.js';
import { ingest } from '../src/producers/ingest.js';
import { JOB_NAME, jobIdFor, newJobData, openAccountQueue } from '../src/queue/account-queues.js';
import { connectRedis } from '../src/redis/connection.js';
import { openQueueServices } from '../src/services.js';
import { plateAt } from './common.js';

export interface IngestJob {
  mode: 'vqb' | 'raw' | 'read' | 'dedup';
  csv: string;
  rows: number;
  prefix: string;
  redisUrl: string;
}

export interface IngestResult {
  type: 'result';
  mode: IngestJob['mode'];
  ms: number;
  rows: number;
  jobs: number;
  /** Kernel-tracked peak resident set of this process (getrusage maxrss). */
  peakRssBytes: number;
  /** Highest process.memoryUsage().rss seen by a 20 ms sampler, as a cross-check. */
  sampledPeakRssBytes: number;
  /** RSS just before the measured work began (module loading, Redis connection). */
  startRssBytes: number;
  /** dedup only: heapUsed + arrayBuffers after a full collection, minus the same before. */
  retainedBytes?: number;
}

export const BATCH_ID = 'bench-ingest';

async function run(job: IngestJob): Promise<IngestResult> {
  const config = loadConfig({}, { REDIS_URL: job.redisUrl, VQ_PREFIX: job.prefix, LOG_LEVEL: 'silent' });
  let sampled = process.memoryUsage().rss;
  const sampler = setInterval(() => {
    sampled = Math.max(sampled, process.memoryUsage().rss);
  }, 20);
  try {
    if (job.mode === 'read') {
      const startRssBytes = process.memoryUsage().rss;
      const t0 = performance.now();
      const { rows } = await readPlateCsv(createReadStream(job.csv));
      let count = 0;
      for await (const _ of rows) count++;
      return finish(job, performance.now() - t0, count, startRssBytes);
    }
    if (job.mode === 'dedup') {
      const retained = heapAfterCollection();
      const startRssBytes = process.memoryUsage().rss;
      const before = retained();
      const t0 = performance.now();
      const deduper = new PlateDeduper();
      for (let i = 0; i < job.rows; i++) deduper.check({ row: i + 1, input: plateAt(i) });
      const ms = performance.now() - t0;
      const retainedBytes = retained() - before;
      if (deduper.size !== job.rows) throw new Error(`the deduper kept ${deduper.size} of ${job.rows} distinct plates`);
      return { ...finish(job, ms, deduper.size, startRssBytes), retainedBytes };
    }
    if (job.mode === 'vqb') {
      const services = await openQueueServices(config);
      const startRssBytes = process.memoryUsage().rss;
      const t0 = performance.now();
      const { header, rows } = await readPlateCsv(createReadStream(job.csv));
      const { batch } = await ingest(
        services,
        { id: BATCH_ID, source: 'file', name: basename(job.csv), extraColumns: header.extraColumns },
        rows,
      );
      const ms = performance.now() - t0;
      await services.close();
      return finish(job, ms, batch.counts.enqueued, startRssBytes);
    }
    const redis = connectRedis(job.redisUrl, { failFast: true, name: 'vqb-bench-raw' });
    const queue = openAccountQueue(config, config.accounts[0]!.id, redis);
    await queue.waitUntilReady();
    const startRssBytes = process.memoryUsage().rss;
    const t0 = performance.now();
    for (let from = 0; from < job.rows; from += 1_000) {
      const chunk = [];
      for (let i = from; i < Math.min(job.rows, from + 1_000); i++) {
        const plate = plateAt(i);
        chunk.push({
          name: JOB_NAME,
          data: newJobData(config.accounts[0]!, BATCH_ID, plate, 'normal'),
          opts: { jobId: jobIdFor(BATCH_ID, plate) },
        });
      }
      await queue.addBulk(chunk);
    }
    const ms = performance.now() - t0;
    const jobs = await queue.getJobCountByTypes('prioritized', 'waiting');
    await queue.close();
    await redis.quit();
    return finish(job, ms, jobs, startRssBytes);
  } finally {
    clearInterval(sampler);
  }

  function finish(j: IngestJob, ms: number, jobs: number, startRssBytes: number): IngestResult {
    sampled = Math.max(sampled, process.memoryUsage().rss);
    return {
      type: 'result',
      mode: j.mode,
      ms,
      rows: j.rows,
      jobs,
      peakRssBytes: process.resourceUsage().maxRSS * 1024,
      sampledPeakRssBytes: sampled,
      startRssBytes,
    };
  }
}

/** Reads heapUsed + arrayBuffers after two full collections (gc exposed at run time). */
function heapAfterCollection(): () => number {
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as () => void;
  return () => {
    gc();
    gc();
    const m = process.memoryUsage();
    return m.heapUsed + m.arrayBuffers;
  };
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href && process.send) {
  process.once('message', (msg: { type: string; job: IngestJob }) => {
    run(msg.job).then(
      (result) => process.send!(result, () => process.exit(0)),
      (err: unknown) =>
        process.send!({ type: 'error', message: String((err as Error).stack ?? err) }, () => process.exit(1)),
    );
  });
  process.once('disconnect', () => process.exit(0));
}

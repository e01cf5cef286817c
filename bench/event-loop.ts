// The event-loop step: how long the heaviest work a `vqb work` or `vqb serve --workers` process
// does blocks its event loop. A block longer than VQ_LOCK_DURATION lets another worker take the
// jobs this process holds (their lock renewals are timers on the same loop); the fence keeps that
// from paying twice, but it costs polls and a possible-duplicate flag, so no block may come near
// the lock. Measured with node's own monitorEventLoopDelay while each piece of work runs in this
// process: a CSV ingest, a finished batch's .xlsx export, its archive (write, read back, forget).
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { loadConfig } from '../src/config.js';
import { ingest } from '../src/producers/ingest.js';
import { readPlateFile } from '../src/producers/plate-file.js';
import { Retention } from '../src/retention.js';
import { openQueueServices } from '../src/services.js';
import { archiveFor, exportBatch, fileSinkFor } from '../src/sinks/export.js';
import { benchPrefix, deleteByPrefix, platesFrom, REDIS_URL } from './common.js';
import { finishAll } from './finished.js';
import type { StepContext } from './upstream.js';

export interface EventLoopFigures {
  rows: number;
  /** The default VQ_LOCK_DURATION the blocks are compared with. */
  lockDurationMs: number;
  /** Per piece of work: its wall time and the longest event-loop block seen while it ran. */
  phases: { name: string; wallMs: number; maxBlockMs: number; p99BlockMs: number }[];
}

async function measured<T>(name: string, work: () => Promise<T>, out: EventLoopFigures['phases']): Promise<T> {
  const histogram = monitorEventLoopDelay({ resolution: 10 });
  histogram.enable();
  const started = performance.now();
  try {
    return await work();
  } finally {
    histogram.disable();
    out.push({
      name,
      wallMs: Math.round(performance.now() - started),
      maxBlockMs: Math.round(histogram.max / 1e6),
      p99BlockMs: Math.round(histogram.percentile(99) / 1e6),
    });
  }
}

export async function measureEventLoop(ctx: StepContext, rows: number): Promise<EventLoopFigures> {
  const prefix = benchPrefix('eventloop');
  const dir = await mkdtemp(join(tmpdir(), 'vqb-bench-loop-'));
  const config = loadConfig(
    {},
    {
      REDIS_URL,
      VQ_PREFIX: prefix,
      LOG_LEVEL: 'silent',
      VQ_OUT_DIR: join(dir, 'out'),
      VQ_ARCHIVE_DIR: join(dir, 'archive'),
    },
  );
  const services = await openQueueServices(config);
  const figures: EventLoopFigures = { rows, lockDurationMs: 30_000, phases: [] };
  try {
    const csv = join(dir, 'plates.csv');
    const plates = platesFrom(ctx.allocatePlates(rows), rows);
    await writeFile(csv, `placa;frota\n${plates.map((p, i) => `${p};${i % 97}`).join('\n')}\n`);
    const batchId = 'bench-eventloop';
    await measured(
      `CSV ingest (${rows.toLocaleString('en')} rows)`,
      async () => {
        const { header, rows: input } = await readPlateFile(csv, 'csv');
        await ingest(
          services,
          { id: batchId, source: 'file', name: 'plates.csv', extraColumns: header.extraColumns },
          input,
        );
      },
      figures.phases,
    );
    await finishAll(services, config, batchId);
    await measured(
      `.xlsx export (${rows.toLocaleString('en')} rows)`,
      () => exportBatch(services, fileSinkFor(config), batchId, ['xlsx']),
      figures.phases,
    );
    const retention = new Retention(services, archiveFor(config), { retainMs: 0 });
    await measured('archive: write, read back, forget', () => retention.archiveAndForget(batchId), figures.phases);
    for (const p of figures.phases)
      ctx.log(`    ${p.name}: ${p.wallMs} ms, longest event-loop block ${p.maxBlockMs} ms (p99 ${p.p99BlockMs} ms)`);
    return figures;
  } finally {
    await services.close();
    await deleteByPrefix(ctx.redis, prefix);
    await rm(dir, { recursive: true, force: true });
  }
}

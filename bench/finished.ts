// The finished step: what Redis keeps per plate once a batch is done. N distinct plates go through
// the real ingest (rows, counts, the scheduler's waiting list), the scheduler hands every one out
// as the feeder would, and the real Recorder stores an outcome for each with an answer shaped as
// the simulator gives it (its fake vehicle, its query ids, ISO timestamps). No upstream and no
// BullMQ jobs: a finished job is removed on completion, so it keeps nothing. MEMORY USAGE per part
// is divided by N; used_memory after − before is the cross-check. With reuse off (the default) each
// done plate leaves a reuse pointer to its batch (priced apart from the batch's keys); then the same
// N results are kept whole for reuse (as when VQ_REUSE_WITHIN is set) to price a whole entry.
import { type Config, loadConfig } from '../src/config.js';
import { noMetrics } from '../src/metrics.js';
import { ingest, rowsFromPlates } from '../src/producers/ingest.js';
import { ReuseStore } from '../src/queue/reuse.js';
import type { PlateJobData } from '../src/queue/types.js';
import { openQueueServices, type QueueServices } from '../src/services.js';
import { fakeVehicle } from '../src/simulator/vehicle.js';
import { Recorder } from '../workers/recorder.js';
import { benchPrefix, deleteByPrefix, keyBytes, platesFrom, REDIS_URL, settleMemory, usedMemory } from './common.js';
import type { StepContext } from './upstream.js';

export interface FinishedFigures {
  plates: number;
  /** used_memory after − before (ingest and outcomes), per plate. */
  redisBytesPerPlate: number;
  /** MEMORY USAGE of the batch's keys per plate, by part (outcomes, input rows, the rest). */
  keyBytesPerPlate: Record<string, number>;
  /** The same, summed. */
  keyBytesTotalPerPlate: number;
  /** A reuse entry per plate, when reuse is on (VQ_REUSE_WITHIN set or the batch asks for it). */
  reuseBytesPerPlate: number;
  /** The reuse pointer to the batch each done plate leaves with reuse off (the default), for VQ_REUSE_KEEP. */
  reusePointerBytesPerPlate: number;
}

function partOf(key: string): string {
  if (/:batch:[^:]+:outcomes$/.test(key)) return 'outcomes';
  if (/:batch:[^:]+:rows$/.test(key)) return 'input rows';
  if (/:reuse-day:/.test(key)) return 'reuse pointers';
  if (/:reuse:/.test(key)) return 'reuse';
  if (/:sched:pending:/.test(key)) return 'waiting list';
  return 'rest';
}

/** The answer body the simulator gives for a completed query. */
function answerFor(plate: string, index: number, createdAt: number, completedAt: number): Record<string, unknown> {
  return {
    id: `q${(1_000_000 + index).toString(36)}-${(index * 7919) % 1000}`,
    status: 'COMPLETED',
    licensePlate: plate,
    createdAt: new Date(createdAt).toISOString(),
    completedAt: new Date(completedAt).toISOString(),
    result: fakeVehicle(plate),
  };
}

/**
 * Stores an outcome for every plate of an ingested batch, as workers would after a successful
 * query (the real Recorder, answers shaped as the simulator gives them), without an upstream.
 */
export async function finishAll(services: QueueServices, config: Config, batchId: string): Promise<void> {
  const account = config.accounts[0]!.id;
  const reuseOff = new ReuseStore(services.redis, services.keys, services.outcomes, {
    keepMs: config.budget.reuseKeepMs,
  });
  const recorder = new Recorder({ ...services, reuse: reuseOff, metrics: noMetrics });
  let index = 0;
  for (;;) {
    const picked = await services.scheduler.pick(account, 1_000, Date.now());
    if (picked.length === 0) break;
    await Promise.all(
      picked.map(async ({ plate, cls }) => {
        const i = index++;
        const finishedAt = Date.now();
        const createdAt = finishedAt - 9_000;
        const queryId = answerFor(plate, i, createdAt, finishedAt)['id'] as string;
        const data: PlateJobData = {
          account,
          batchId,
          cls,
          plate,
          product: 'agregados',
          step: 'poll',
          queryId,
          createdAt,
          polls: 1,
          requests: 2,
        };
        const job = { id: `${batchId}.${plate}`, timestamp: createdAt - 2_000, attemptsMade: 0 } as Parameters<
          Recorder['record']
        >[0];
        await recorder.record(job, data, undefined, answerFor(plate, i, createdAt, finishedAt - 500));
      }),
    );
    await services.scheduler.unstage(account, picked);
  }
  // Ingest fed the first few plates as jobs at once: record them too, and drop their jobs (a
  // worker's finished job is removed on completion).
  const queue = services.accounts.queue(account);
  for (const job of await queue.getJobs(['waiting', 'prioritized', 'delayed'])) {
    const plate = job.data.plate;
    const at = Date.now();
    const data: PlateJobData = {
      ...job.data,
      step: 'poll',
      queryId: `q${index}`,
      createdAt: at - 9_000,
      polls: 1,
      requests: 2,
    };
    await recorder.record(job, data, undefined, answerFor(plate, index++, at - 9_000, at - 500));
  }
  await queue.drain(true);
}

export async function measureFinished(ctx: StepContext, plates: number): Promise<FinishedFigures> {
  const prefix = benchPrefix('finished');
  const config = loadConfig({}, { REDIS_URL, VQ_PREFIX: prefix, LOG_LEVEL: 'silent' });
  const services = await openQueueServices(config);
  try {
    const list = platesFrom(ctx.allocatePlates(plates), plates);
    await settleMemory(ctx.redis);
    const before = await usedMemory(ctx.redis);
    const batchId = 'bench-finished';
    await ingest(services, { id: batchId, source: 'library', name: 'finished' }, rowsFromPlates(list));
    await finishAll(services, config, batchId);
    const { counts } = await services.batchViews.get(batchId);
    if (counts.done !== plates)
      throw new Error(`${counts.done} of ${plates} outcomes recorded (${JSON.stringify(counts)})`);
    const after = await usedMemory(ctx.redis);
    const { 'reuse pointers': pointers = 0, ...parts } = await keyBytes(ctx.redis, prefix, partOf);

    // The same results kept for reuse, as when reuse is on.
    const reuseOn = new ReuseStore(services.redis, services.keys, services.outcomes, {
      keepMs: config.budget.reuseKeepMs,
      defaultWithinMs: 86_400_000,
    });
    for (let from = 0; from < list.length; from += 1_000) {
      await Promise.all(
        list
          .slice(from, from + 1_000)
          .map((plate, i) =>
            reuseOn.save(
              config.accounts[0]!.id,
              plate,
              { queryId: `q${i}`, result: answerFor(plate, from + i, Date.now(), Date.now()), at: Date.now() },
              batchId,
            ),
          ),
      );
    }
    const withReuse = await keyBytes(ctx.redis, prefix, partOf);
    const perPlate = Object.fromEntries(Object.entries(parts).map(([part, bytes]) => [part, bytes / plates]));
    return {
      plates,
      redisBytesPerPlate: (after - before) / plates,
      keyBytesPerPlate: perPlate,
      keyBytesTotalPerPlate: Object.values(parts).reduce((a, b) => a + b, 0) / plates,
      reuseBytesPerPlate: (withReuse['reuse'] ?? 0) / plates,
      reusePointerBytesPerPlate: pointers / plates,
    };
  } finally {
    await services.close();
    const removed = await deleteByPrefix(ctx.redis, prefix);
    await settleMemory(ctx.redis);
    ctx.log(`    removed ${removed} keys under ${prefix}`);
  }
}

// A second producer's ingest waiting on another's lock of the same batch, in a store on a clock the
// test owns: its only timer is the lock's expiry, so once it waits on that clock (subscribed to the
// releases, past its last try) and the clock stands still, nothing but the release's message can
// let it take the lock, and no loop on the clock asks Redis again meanwhile.
import { BatchStore } from '../../src/queue/batch/store.js';
import type { Harness } from './engine.js';
import type { ManualClock } from './manual-clock.js';
import { waitFor } from './process.js';

export interface WaitingIngest {
  /** What the wait said at once: the lock's time left, ms. */
  waits: number[];
  taken(): boolean;
  /** The lock, once taken. */
  lock: Promise<{ release(): Promise<void> }>;
}

/** Starts the wait and resolves once it sleeps on `clock` (the lock held by another). */
export async function waitingIngest(h: Harness, batchId: string, clock: ManualClock): Promise<WaitingIngest> {
  const store = new BatchStore(h.services.redis, h.services.keys, clock);
  const waits: number[] = [];
  let taken = false;
  const lock = store
    .lockIngest(batchId, (ms) => waits.push(ms))
    .then((held) => {
      taken = true;
      return held;
    });
  await waitFor(async () => clock.pending === 1, 10_000, 'waiting on the lock’s expiry');
  return { waits, taken: () => taken, lock };
}

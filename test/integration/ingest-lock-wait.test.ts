// A rerun that finds another ingest of the same batch holding its lock (a process killed mid-ingest
// leaves it until it expires) says so at once, with how long, instead of printing nothing for a minute.
// The wait itself is an event: the holder's release is published (lua/lock-release-1.lua), and the
// only timer is the lock's expiry, for a holder that died.
import { describe, expect, it } from 'vitest';
import { ingest, rowsFromPlates } from '../../src/producers/ingest.js';
import { makePlates, useHarness } from '../helpers/engine.js';
import { waitingIngest } from '../helpers/ingest-lock.js';
import { ManualClock } from '../helpers/manual-clock.js';
import { waitFor } from '../helpers/process.js';

const harness = useHarness();

describe('ingest lock', () => {
  it('waiting for another ingest of the batch is said at once, once, with when its lock expires; the ingest then goes on', async () => {
    const h = await harness.start({ label: 'ingest-lock', workers: 0 });
    // What a process killed mid-ingest leaves: the batch opened, its ingest lock held.
    await h.open('locked');
    const held = await h.services.batches.lockIngest('locked');
    const waits: number[] = [];
    const running = ingest(
      h.services,
      { id: 'locked', source: 'library', name: 'locked', onLockWait: (ms) => waits.push(ms) },
      rowsFromPlates(makePlates(5)),
    );
    await new Promise((r) => setTimeout(r, 600));
    expect(waits).toHaveLength(1);
    expect(waits[0]).toBeGreaterThan(55_000);
    expect(waits[0]).toBeLessThanOrEqual(60_000);
    await held.release();
    const { batch } = await running;
    expect(batch.counts.enqueued).toBe(5);
    expect(waits).toHaveLength(1);
  });

  it('a wait for the lock is its release, heard: taken with the clock standing still, nothing asked meanwhile', async () => {
    const h = await harness.start({ label: 'ingest-unlock', workers: 0 });
    await h.open('unlock');
    const held = await h.services.batches.lockIngest('unlock');
    const clock = new ManualClock(Date.now());
    const second = await waitingIngest(h, 'unlock', clock);
    expect(second.taken()).toBe(false);
    expect(second.waits).toHaveLength(1);
    const stood = clock.now();
    await held.release();
    // A bound against a hang, not a timing: without the release's message it is never taken.
    await waitFor(async () => second.taken(), 10_000, 'the lock taken with the clock standing still');
    expect(clock.now()).toBe(stood);
    const lock = await second.lock;
    expect(clock.pending, 'the expiry timer cleared').toBe(0);
    await lock.release();
  });

  it('a holder that died: the wait ends at its lock’s expiry', async () => {
    const h = await harness.start({ label: 'ingest-expiry', workers: 0 });
    await h.open('expiry');
    // What a holder killed mid-ingest leaves, a moment before it expires (no release will come).
    const ref = await h.services.batches.ref('expiry');
    await h.services.redis.set(h.services.keys.ingestLock(ref), 'dead', 'PX', 300);
    const waits: number[] = [];
    const lock = await h.services.batches.lockIngest('expiry', (ms) => waits.push(ms));
    expect(waits).toHaveLength(1);
    expect(waits[0]).toBeLessThanOrEqual(300);
    await lock.release();
  });
});

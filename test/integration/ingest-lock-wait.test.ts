// A rerun that finds another ingest of the same batch holding its lock (a process killed mid-ingest
// leaves it until it expires) says so at once, with how long, instead of printing nothing for a minute.
import { describe, expect, it } from 'vitest';
import { ingest, rowsFromPlates } from '../../src/producers/ingest.js';
import { makePlates, useHarness } from '../helpers/engine.js';

const harness = useHarness();

describe('ingest lock', () => {
  it('waiting for another ingest of the batch is said at once, once, with when its lock expires; the ingest then goes on', async () => {
    const h = await harness.start({ label: 'ingest-lock', workers: 0 });
    // What a process killed mid-ingest leaves: the batch opened, its ingest lock held.
    const account = h.config.accounts[0]!;
    await h.services.batches.open({
      id: 'locked',
      account: account.id,
      priority: 'normal',
      weight: 1,
      source: 'library',
      name: 'locked',
      product: account.product,
    });
    const held = await h.services.batches.lockIngest('locked');
    const waits: number[] = [];
    const started = Date.now();
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
    expect(Date.now() - started).toBeLessThan(10_000);
  });
});

// Watch lists against the simulator changing answers between rounds: three rounds of a list,
// rounds 2 and 3 report exactly the plates and fields the simulator changed (none missed, none
// invented), one signed plate.changed per changed plate, and the upstream sees one create per
// plate per round. The schedule is seconds apart here (VQ_WATCH_MIN_EVERY shortened): what is
// shown is the mechanism, BullMQ's job scheduler firing each round once.
import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Watches } from '../../src/watch/watches.js';
import { type Harness, startHarness } from '../helpers/engine.js';
import { waitFor } from '../helpers/process.js';
import { type Receiver, startReceiver } from '../helpers/webhook-receiver.js';

const SECRET = `whsec_${randomBytes(32).toString('base64')}`;
const N = 500;
const PLATES = Array.from({ length: N }, (_, i) => `WAT${String(i).padStart(4, '0')}`);

let h: Harness | undefined;
let rx: Receiver | undefined;
const open: Watches[] = [];
afterEach(async () => {
  for (const w of open.splice(0)) await w.close();
  await h?.close();
  await rx?.close();
  h = undefined;
  rx = undefined;
});

interface SimChange {
  plate: string;
  field: string;
}

async function changeAnswers(url: string, share: number): Promise<SimChange[]> {
  const res = await fetch(`${url}/__admin/changes`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ share }),
  });
  return ((await res.json()) as { changes: SimChange[] }).changes;
}

async function closed(watches: Watches, round: number, timeoutMs = 40_000): Promise<void> {
  await waitFor(
    async () => (await watches.store.round({ account: 'default', name: 'fleet' }, round))?.closedAt !== undefined,
    timeoutMs,
    `round ${round} compared`,
  );
}

describe('a watch list against answers that change', () => {
  it('three rounds: 2 and 3 find exactly what changed, a signed webhook per change, N creates a round', async () => {
    rx = await startReceiver(SECRET);
    h = await startHarness({
      label: 'watch-rounds',
      sim: { completionMs: [50, 150] },
      config: {
        VQ_RATE_LIMIT: '400/s',
        VQ_WATCH_MIN_EVERY: '1s',
        VQ_WATCH_SWEEP: '250ms',
        VQ_WEBHOOK_SECRET: SECRET,
        VQ_WEBHOOK_ALLOW: '127.0.0.1',
        VQ_WEBHOOK_BACKOFF: '50ms',
      },
    });
    await h.services.answers.learn('default', { id: '/body/queryId', status: '/body/status' }, Date.now());
    h.startWorker();
    const watches = new Watches(h.services, h.logs.logger);
    open.push(watches);
    const ref = { account: 'default', name: 'fleet' };
    // 12 s apart: round 1 fires as it is added, and on a loaded machine it started 5 s late and
    // took 3 s, so with 8 s round 2 began before the test had changed the answers for it.
    await watches.add({ name: 'fleet', every: '12s', callbackUrl: rx.url }, PLATES, ['default']);

    await closed(watches, 1);
    const first = await watches.store.round(ref, 1);
    expect(first).toMatchObject({ plates: N, firstRecord: true, changes: 0 });
    expect(h.sim.stats().creates).toBe(N);

    const expected: SimChange[][] = [];
    for (const round of [2, 3]) {
      const made = await changeAnswers(h.sim.url, 0.1);
      expect(made.length).toBe(N / 10);
      expected[round] = made;
      await closed(watches, round);
      const found = (await watches.changes(ref, round)).changes;
      const key = (c: SimChange) => `${c.plate} result.${c.field}`;
      expect(found.map((c) => `${c.plate} ${c.field}`).sort()).toEqual(made.map(key).sort());
      // The values too: before and after as the simulator made them.
      for (const c of found) {
        const m = made.find((x) => x.plate === c.plate) as unknown as { before: string; after: string };
        expect([c.before, c.after]).toEqual([m.before, m.after]);
      }
      expect(h.sim.stats().creates).toBe(N * round);
    }

    // One plate.changed per changed plate and round, each verified against the secret.
    const want = N / 10 + N / 10;
    const got = await rx.waitFor(want, (d) => d.payload?.type === 'plate.changed');
    const changed = got.filter((d) => d.payload?.type === 'plate.changed');
    expect(changed.every((d) => d.verifyError === undefined)).toBe(true);
    const perRound = (r: number) =>
      changed
        .filter((d) => d.payload.data.round === r)
        .map((d) => d.payload.data.plate)
        .sort();
    expect(perRound(2)).toEqual(expected[2]!.map((c) => c.plate).sort());
    expect(perRound(3)).toEqual(expected[3]!.map((c) => c.plate).sort());
    expect(new Set(changed.map((d) => d.id)).size).toBe(changed.length);

    // The changes export sits beside the round's full export.
    const round3 = await watches.store.round(ref, 3);
    expect(round3?.export).toBe(join(h.config.outDir, 'watch-fleet-3.changes.csv'));
    const csv = await readFile(round3!.export!, 'utf8');
    expect(csv.trim().split('\r\n')).toHaveLength(1 + N / 10);
    await readFile(join(h.config.outDir, 'watch-fleet-3.csv'), 'utf8');
  }, 85_000);
  it('notify round: one signed watch.round_finished with every change of the round', async () => {
    rx = await startReceiver(SECRET);
    h = await startHarness({
      label: 'watch-round-event',
      sim: { completionMs: [20, 60] },
      config: {
        VQ_RATE_LIMIT: '400/s',
        VQ_WATCH_MIN_EVERY: '1s',
        VQ_WATCH_SWEEP: '200ms',
        VQ_WEBHOOK_SECRET: SECRET,
        VQ_WEBHOOK_ALLOW: '127.0.0.1',
      },
    });
    await h.services.answers.learn('default', { id: '/body/queryId', status: '/body/status' }, Date.now());
    h.startWorker();
    const watches = new Watches(h.services, h.logs.logger);
    open.push(watches);
    const ref = { account: 'default', name: 'fleet' };
    const plates = PLATES.slice(0, 50);
    await watches.add({ name: 'fleet', every: '1h', notify: 'round', callbackUrl: rx.url }, plates, ['default']);
    await closed(watches, 1);
    const made = await changeAnswers(h.sim.url, 0.2);
    await watches.rounds.fire(ref, 'round-event-2');
    await closed(watches, 2);
    const [event] = await rx.waitFor(1, (d) => d.payload?.type === 'watch.round_finished');
    expect(event!.verifyError).toBeUndefined();
    expect(event!.payload.data).toMatchObject({ watch: 'fleet', round: 2, plates: 50, changedPlates: made.length });
    const listed = (event!.payload.data.changes as { plate: string; field: string }[]).map(
      (c) => `${c.plate} ${c.field}`,
    );
    expect(listed.sort()).toEqual(made.map((c) => `${c.plate} result.${c.field}`).sort());
    expect(rx.deliveries.filter((d) => d.payload?.type === 'plate.changed')).toEqual([]);
  }, 60_000);

  it('a watch on a pool of keys: its round is served by every key, each plate created once', async () => {
    const pool = [
      { id: 'k10', rateLimit: '10/s', key: { rateLimit: '10/s' }, fields: { pool: 'fleet' } },
      { id: 'k20', rateLimit: '20/s', key: { rateLimit: '20/s' }, fields: { pool: 'fleet' } },
    ];
    h = await startHarness({
      label: 'watch-pool',
      accounts: pool,
      sim: { completionMs: [50, 150] },
      config: { VQ_WATCH_MIN_EVERY: '1s', VQ_WATCH_SWEEP: '250ms' },
    });
    for (const a of pool)
      await h.services.answers.learn(a.id, { id: '/body/queryId', status: '/body/status' }, Date.now());
    h.startWorker();
    const watches = new Watches(h.services, h.logs.logger);
    open.push(watches);
    const plates = PLATES.slice(0, 120);
    const view = await watches.add({ name: 'fleet', every: '1h', pool: 'fleet' }, plates, ['k10', 'k20']);
    expect(view).toMatchObject({ account: 'k10' });
    await waitFor(
      async () => (await watches.store.round({ account: 'k10', name: 'fleet' }, 1))?.closedAt !== undefined,
      40_000,
      'round 1 compared',
    );
    const stats = h.sim.stats();
    expect(stats.creates).toBe(plates.length);
    expect(stats.duplicateCreates).toBe(0);
    // Both keys of the pool created plates of the round.
    expect(stats.byKey.k10?.counted ?? 0).toBeGreaterThan(0);
    expect(stats.byKey.k20?.counted ?? 0).toBeGreaterThan(0);
  }, 60_000);
});

// `vqb watch` as a user types it, and what a list does over time: a plate added later is compared
// from its first result on, a plate removed is forgotten after the retention, a round due outside
// its window waits for the window to open.
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Watches } from '../../src/watch/watches.js';
import { type Harness, makePlates, startHarness } from '../helpers/engine.js';
import { harnessEnv, runVqb, waitFor } from '../helpers/process.js';

let h: Harness | undefined;
const open: Watches[] = [];
afterEach(async () => {
  for (const w of open.splice(0)) await w.close();
  await h?.close();
  h = undefined;
});

async function start(label: string, config: Record<string, string> = {}) {
  h = await startHarness({
    label,
    sim: { completionMs: [20, 60] },
    config: { VQ_WATCH_MIN_EVERY: '1s', VQ_WATCH_SWEEP: '200ms', VQ_RATE_LIMIT: '200/s', ...config },
  });
  await h.services.answers.learn('default', { id: '/body/queryId', status: '/body/status' }, Date.now());
  const watches = new Watches(h.services, h.logs.logger);
  open.push(watches);
  return { h, watches };
}

describe('vqb watch', () => {
  it('add, list, show, changes, pause, remove; bad input exits 2 with the reason', async () => {
    const { h, watches } = await start('watch-cli');
    h.startWorker();
    const env = harnessEnv(h, { VQ_WATCH_MIN_EVERY: '1s' });
    const vqb = async (...args: string[]) => runVqb(['watch', ...args], env);
    const plates = makePlates(6);
    const file = join(h.config.outDir, '..', 'frota.csv');
    await writeFile(file, `placa\r\n${plates.join('\r\n')}\r\nnot-a-plate\r\n`);

    const added = await vqb('add', file, '--every', '1h', '--ignore', 'result.color');
    expect(added.code, added.stderr).toBe(0);
    expect(added.stdout).toMatch(/1 rows are not plates/);
    expect(added.stdout).toMatch(/watch frota \(account default\): 6 plates, every 1h, overlap wait, notify plate/);
    const ref = { account: 'default', name: 'frota' };
    await waitFor(async () => (await watches.store.round(ref, 1))?.closedAt !== undefined, 20_000, 'round 1');
    await fetch(`${h.sim.url}/__admin/changes`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ plates: [plates[0]] }),
    });
    await watches.rounds.fire(ref, 'cli-2');
    await waitFor(async () => (await watches.store.round(ref, 2))?.closedAt !== undefined, 20_000, 'round 2');

    const list = await vqb('list');
    expect(list.stdout).toMatch(/^frota {2}default {2}6 plates {2}every 1h {2}round 2 {2}idle/m);
    const show = await vqb('show', 'frota', '--json');
    expect(JSON.parse(show.stdout)).toMatchObject({ name: 'frota', plates: 6, ignore: ['result.color'], round: 2 });
    const changes = await vqb('changes', 'frota', '--round', '2');
    expect(changes.code, changes.stderr).toBe(0);
    const lines = changes.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ round: 2, plate: plates[0] });
    expect(Object.keys(lines[0]!)).toEqual(['round', 'plate', 'field', 'before', 'after', 'at']);
    const csv = await vqb('changes', 'frota', '--format', 'csv');
    expect(csv.stdout).toMatch(/round;plate;field;before;after;at\r\n2;/);

    for (const [args, message] of [
      [['add', file, '--every', 'often', '--name', 'x'], /--every "often": a duration/],
      [['add', file, '--cron', '99 * * * *', '--name', 'x'], /not a cron line/],
      [['add', file, '--every', '1h', '--window', '22-06', '--name', 'x'], /HH:MM-HH:MM/],
      [['add', file, '--every', '1h', '--pool', 'p1', '--name', 'x'], /no pool "p1"/],
      [['add', file, '--every', '1h'], /has a watch named frota already/],
      [['show', 'nope'], /no watch named "nope"/],
      [['changes', 'frota', '--round', '9'], /no compared round 9/],
    ] as const) {
      const run = await vqb(...args);
      expect(run.code, `${args.join(' ')}: ${run.stderr}`).toBe(2);
      expect(run.stderr).toMatch(message);
    }

    const paused = await vqb('pause', 'frota');
    expect(paused.stdout).toMatch(/state: paused/);
    expect((await vqb('remove', 'frota')).stdout).toMatch(/watch frota removed/);
    expect((await vqb('show', 'frota')).code).toBe(2);
  }, 85_000);

  it('a plate added later is compared from its first result; one removed is forgotten after retention', async () => {
    const { h, watches } = await start('watch-plates', { VQ_WATCH_FORGET: '1ms' });
    h.startWorker();
    const ref = { account: 'default', name: 'growing' };
    const [a, b, c] = makePlates(3);
    await watches.add({ name: 'growing', every: '1h' }, [a!, b!], ['default']);
    const compared = (n: number) => async () => (await watches.store.round(ref, n))?.closedAt !== undefined;
    await waitFor(compared(1), 20_000, 'round 1');
    await watches.store.addPlates(ref, [c!], Date.now());
    await watches.store.removePlates(ref, [b!], Date.now());
    // c changes before its first result: nothing to compare it with yet.
    await fetch(`${h.sim.url}/__admin/changes`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ plates: [c] }),
    });
    await watches.rounds.fire(ref, 'plates-2');
    await waitFor(compared(2), 20_000, 'round 2');
    expect((await watches.changes(ref, 2)).changes).toEqual([]);
    expect((await watches.store.round(ref, 2))?.plates).toBe(2);
    // b, removed past the retention (1 ms here), is forgotten; a and c are known.
    const known = await watches.store.lastResults(ref, [a!, b!, c!]);
    expect(known.map((k) => k !== undefined)).toEqual([true, false, true]);
    // Now c changes: round 3 finds it.
    await fetch(`${h.sim.url}/__admin/changes`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ plates: [c] }),
    });
    await watches.rounds.fire(ref, 'plates-3');
    await waitFor(compared(3), 20_000, 'round 3');
    expect((await watches.changes(ref, 3)).changes.map((x) => x.plate)).toEqual([c]);
    expect(await watches.store.history(ref, c!)).toHaveLength(1);
  }, 60_000);

  it('a round due outside its window waits for the window to open', async () => {
    const { watches } = await start('watch-window');
    const ref = { account: 'default', name: 'nights' };
    const now = new Date();
    // A window of one minute starting two minutes from now (UTC): closed now.
    const at = (m: number) => {
      const d = new Date(now.getTime() + m * 60_000);
      return `${String(d.getUTCHours()).padStart(2, '0')}:${String(d.getUTCMinutes()).padStart(2, '0')}`;
    };
    await watches.add({ name: 'nights', every: '1h', window: `${at(2)}-${at(3)}` }, makePlates(2), ['default']);
    expect(await watches.rounds.fire(ref, 'window-1')).toBe('window');
    const shown = await watches.show(ref);
    expect(shown).toMatchObject({ state: 'window', round: 0, due: true });
    expect(shown.reason).toMatch(/waits for its window/);
    const delayed = await watches.schedules.queue.getJobs(['delayed']);
    const opening = delayed.find((j) => j.id?.startsWith('default.nights.window-'));
    expect(opening).toBeDefined();
    const opensAt = Number(opening!.id!.split('window-')[1]);
    expect(opensAt).toBeGreaterThan(Date.now());
    expect(new Date(opensAt).toISOString().slice(11, 16)).toBe(at(2));
    // Fired again while closed: the same opening job, not a second.
    await watches.rounds.fire(ref, 'window-2');
    const again = await watches.schedules.queue.getJobs(['delayed']);
    expect(again.filter((j) => j.id?.startsWith('default.nights.window-'))).toHaveLength(1);
  }, 30_000);
});

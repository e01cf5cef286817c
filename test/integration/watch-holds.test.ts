// A watch's rounds held: by the month budget (held at it with the reason; raising it goes on), by
// a round still running when the next is due (said, never overlapping), and refused input.
import { afterEach, describe, expect, it } from 'vitest';
import { isVqbError } from '../../src/errors.js';
import { Watches } from '../../src/watch/watches.js';
import { type Harness, startHarness } from '../helpers/engine.js';
import { rejection, waitFor } from '../helpers/process.js';

let h: Harness | undefined;
const open: Watches[] = [];
afterEach(async () => {
  for (const w of open.splice(0)) await w.close();
  await h?.close();
  h = undefined;
});

const plates = (n: number, prefix: string) =>
  Array.from({ length: n }, (_, i) => `${prefix}${String(i).padStart(4, '0')}`);

async function harness(label: string, sim: { completionMs: [number, number] }, extra: Record<string, string> = {}) {
  h = await startHarness({
    label,
    sim,
    accounts: [{ id: 'a' }, { id: 'b' }],
    config: { VQ_RATE_LIMIT: '200/s', VQ_WATCH_MIN_EVERY: '1s', VQ_WATCH_SWEEP: '200ms', ...extra },
  });
  for (const id of ['a', 'b'])
    await h.services.answers.learn(id, { id: '/body/queryId', status: '/body/status' }, Date.now());
  const watches = new Watches(h.services, h.logs.logger);
  open.push(watches);
  return { h, watches };
}

describe('watch rounds that hold', () => {
  it('a month budget smaller than a round: held at the budget with the reason; raising it goes on', async () => {
    const { h, watches } = await harness('watch-budget', { completionMs: [20, 60] });
    h.startWorker();
    const ref = { account: 'a', name: 'capped' };
    await watches.add({ name: 'capped', account: 'a', every: '60s', perMonth: 25 }, plates(40, 'BGT'), ['a', 'b']);
    await waitFor(async () => h.sim.stats().creates >= 25, 20_000, '25 creates');
    const batch = { id: 'watch-capped-1', account: 'a' };
    await waitFor(async () => (await h.services.batchViews.get(batch)).blocked !== undefined, 20_000, 'batch blocked');
    const held = await watches.show(ref);
    expect(held.state).toBe('held');
    expect(held.reason).toMatch(/month budget: 25 of 40 plates/);
    expect(h.sim.stats().creates).toBe(25);
    expect((await watches.store.round(ref, 1))?.closedAt).toBeUndefined();

    await watches.setBudget(ref, 100);
    await waitFor(async () => (await watches.store.round(ref, 1))?.closedAt !== undefined, 30_000, 'round 1 compared');
    expect(h.sim.stats().creates).toBe(40);
    const after = await watches.show(ref);
    expect(after.spentThisMonth).toBe(40);

    // Nothing left in the month: the next round does not start, and says why.
    await watches.setBudget(ref, 40);
    await watches.rounds.fire(ref, 'test-next');
    const none = await watches.show(ref);
    expect(none).toMatchObject({ state: 'held', round: 1 });
    expect(none.reason).toMatch(/month budget of 40 creates/);
    await watches.setBudget(ref, 80);
    await waitFor(async () => (await watches.store.round(ref, 2))?.closedAt !== undefined, 30_000, 'round 2 compared');
    expect(h.sim.stats().creates).toBe(80);
  }, 85_000);

  it.each([
    [1, "fire's read of the watch"],
    [2, 'the start’s own read'],
  ])(
    'a pause that lands after read %i (%s) of a due round’s start: no round starts, nothing is paid',
    async (after) => {
      const { h, watches } = await harness(`watch-pause-race-${after}`, { completionMs: [20, 60] });
      h.startWorker();
      const ref = { account: 'a', name: 'racy' };
      await watches.add({ name: 'racy', account: 'a', every: '1h' }, plates(5, 'RCE'), ['a']);
      await waitFor(
        async () => (await watches.store.round(ref, 1))?.closedAt !== undefined,
        20_000,
        'round 1 compared',
      );
      // The pause answers after the watch was read as running, before the round is written (a CI
      // run saw a round start after `vqb watch pause` had answered): after `fire`'s read, or after
      // the second read the start makes (no read closes that one: the start checks in the same step
      // as it writes, watch-start.lua).
      const get = watches.store.get.bind(watches.store);
      let reads = 0;
      watches.store.get = async (r) => {
        const w = await get(r);
        if (++reads === after) await watches.pause(ref);
        return w;
      };
      expect(await watches.rounds.fire(ref, 'due-while-pausing')).toBe('paused');
      expect((await watches.store.rounds(ref)).map((r) => r.round)).toEqual([1]);
      expect((await watches.show(ref)).state).toBe('paused');
      expect(h.sim.stats().creates).toBe(5);
    },
  );

  it('a round still running when the next is due: said, and the next waits for it (no overlap)', async () => {
    const { h, watches } = await harness('watch-overlap', { completionMs: [2500, 3000] });
    h.startWorker();
    const ref = { account: 'a', name: 'slow' };
    await watches.add({ name: 'slow', account: 'a', every: '1s' }, plates(10, 'OVL'), ['a']);
    await waitFor(async () => (await watches.show(ref)).state === 'overlap', 20_000, 'overlap said');
    // Which round is the first to be still running when a fire comes is the scheduler's timing on a
    // loaded machine (a fire late by the round's 2.5-3 s finds round 1 closed: CI saw it), so the
    // test holds what is always true: the overlap said names a round and the one after it.
    const said = (await watches.show(ref)).reason?.match(/round (\d+) still running when round (\d+) came due/);
    expect(said).toBeTruthy();
    expect(Number(said![2])).toBe(Number(said![1]) + 1);
    const logged = h.logs.lines.map((l) => /round (\d+) still running when round (\d+) came due/.exec(String(l.msg)));
    expect(logged.some((m) => m !== null && Number(m[2]) === Number(m[1]) + 1)).toBe(true);
    await waitFor(async () => (await watches.store.round(ref, 3))?.closedAt !== undefined, 40_000, 'round 3 compared');
    await watches.pause(ref);
    // A round running when the watch was paused finishes and is compared.
    await waitFor(async () => (await watches.show(ref)).open === undefined, 20_000, 'the last round compared');
    const rounds = await watches.store.rounds(ref);
    for (let i = 1; i < rounds.length; i++)
      if (rounds[i - 1]!.closedAt !== undefined)
        expect(rounds[i]!.startedAt).toBeGreaterThanOrEqual(rounds[i - 1]!.closedAt!);
    expect(h.sim.stats().creates).toBe(10 * rounds.length);
  }, 85_000);

  it('overlap skip: the due round is skipped and counted', async () => {
    const { h, watches } = await harness('watch-skip', { completionMs: [2500, 3000] });
    h.startWorker();
    const ref = { account: 'a', name: 'skipper' };
    await watches.add({ name: 'skipper', account: 'a', every: '1s', overlap: 'skip' }, plates(5, 'SKP'), ['a']);
    await waitFor(async () => (await watches.show(ref)).skipped > 0, 20_000, 'a round skipped');
    expect((await watches.show(ref)).reason).toMatch(/skipped/);
    await watches.pause(ref);
  }, 60_000);

  it('bad input is refused with typed errors; another account cannot see a watch', async () => {
    const { watches } = await harness('watch-input', { completionMs: [20, 60] });
    const code = async (p: Promise<unknown>) => {
      const err = await rejection(p);
      return isVqbError(err) ? err.code : String(err);
    };
    const list = plates(3, 'BAD');
    expect(await code(watches.add({ name: 'x', every: '7x' }, list, ['a']))).toBe('WATCH_BAD_SCHEDULE');
    expect(await code(watches.add({ name: 'x', every: '10ms' }, list, ['a']))).toBe('WATCH_BAD_SCHEDULE');
    expect(await code(watches.add({ name: 'x', cron: '61 * * * *' }, list, ['a']))).toBe('WATCH_BAD_SCHEDULE');
    expect(await code(watches.add({ name: 'x', cron: 'every day' }, list, ['a']))).toBe('WATCH_BAD_SCHEDULE');
    expect(await code(watches.add({ name: 'x', every: '1h', window: '25:00-06:00' }, list, ['a']))).toBe(
      'WATCH_BAD_SCHEDULE',
    );
    expect(await code(watches.add({ name: 'x' }, list, ['a']))).toBe('WATCH_BAD_SCHEDULE');
    expect(await code(watches.add({ name: 'bad name!', every: '1h' }, list, ['a']))).toBe('WATCH_BAD_NAME');
    expect(await code(watches.add({ name: 'x', every: '1h', pool: 'p1' }, list, ['a']))).toBe('POOL_NOT_FOUND');
    expect(await code(watches.add({ name: 'x', every: '1h', account: 'b' }, list, ['a']))).toBe('ACCOUNT_NOT_FOUND');
    expect(await code(watches.find('nope', ['a', 'b']))).toBe('WATCH_NOT_FOUND');

    await watches.add({ name: 'mine', account: 'a', cron: '0 3 * * 1' }, list, ['a']);
    expect(await code(watches.add({ name: 'mine', account: 'a', every: '1h' }, list, ['a']))).toBe('WATCH_EXISTS');
    expect((await watches.find('mine', ['a'])).account).toBe('a');
    expect(await code(watches.find('mine', ['b']))).toBe('WATCH_NOT_FOUND');
    expect(await watches.list(['b'])).toEqual([]);
    expect(await code(watches.changes({ account: 'a', name: 'mine' }, 1))).toBe('WATCH_ROUND_NOT_FOUND');
    await watches.remove({ account: 'a', name: 'mine' });
  }, 30_000);
});

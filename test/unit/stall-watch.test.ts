// The simulator's stall watch and the helper that tells a stall's 429s from the client's.
import { describe, expect, it } from 'vitest';
import { StallWatch } from '../../src/simulator/stall-watch.js';
import type { SimulatorStats } from '../../src/simulator/stats.js';
import { refusalsNotFromStalls } from '../helpers/engine.js';
import { ManualClock } from '../helpers/manual-clock.js';

describe('the simulator stall watch', () => {
  it('records a gap in its looks longer than 20 ms, from the look before to the look after, and nothing else', () => {
    const clock = new ManualClock();
    // The loop's own time: it moves on without the watch's looks while the loop is stalled.
    let stalled = 0;
    const watch = new StallWatch(() => clock.now() + stalled, clock);
    watch.start();
    const t0 = clock.now();
    clock.advance(1_000);
    expect(watch.list()).toEqual([]);
    stalled += 8; // a look 18 ms after the one before: under 20
    clock.advance(10);
    expect(watch.list()).toEqual([]);
    stalled += 20; // 30 ms: a stall of the kind half of the gate's 25 ms allowance is about
    clock.advance(10);
    expect(watch.list()).toEqual([{ from: t0 + 1_010 + 8, to: t0 + 1_020 + 28 }]);
    stalled += 300;
    clock.advance(10);
    expect(watch.list()).toEqual([
      { from: t0 + 1_010 + 8, to: t0 + 1_020 + 28 },
      { from: t0 + 1_020 + 28, to: t0 + 1_030 + 328 },
    ]);
  });
});

function statsWith(refused: number[], stalls: { from: number; to: number }[]): SimulatorStats {
  return { timesByKey: { k: { creates: [], gets: [], refused } }, stalls } as unknown as SimulatorStats;
}

describe('refusalsNotFromStalls', () => {
  it('at the gate’s 25 ms allowance, a 30 ms stall begun 15 ms before the window start explains a 429; begun 10 ms before, it does not', () => {
    const explained = statsWith([2_000], [{ from: 985, to: 1_015 }]);
    expect(refusalsNotFromStalls(explained, 25)).toEqual({ unexplained: [], fromStalls: 1 });
    const tooLate = statsWith([2_000], [{ from: 990, to: 1_020 }]);
    expect(refusalsNotFromStalls(tooLate, 25)).toEqual({ unexplained: [{ key: 'k', at: 2_000 }], fromStalls: 0 });
  });

  const allowance = 150;
  it('a 429 a window after a stall that held its window start, longer than half the allowance before it, is the stall’s', () => {
    // Stall 3,039 → 3,390: the requests of those 351 ms were seen at 3,390.
    const stats = statsWith([4_200, 4_380], [{ from: 3_039, to: 3_390 }]);
    expect(refusalsNotFromStalls(stats, allowance)).toEqual({ unexplained: [], fromStalls: 2 });
  });

  it('a 429 with no stall at its window start, or one too short to matter, is the client’s', () => {
    const stats = statsWith(
      [2_000, 4_100, 4_500],
      [
        { from: 3_039, to: 3_390 }, // 4,100 - 1,000 = 3,100: begun only 61 ms before it (≤ 75)
        { from: 1_200, to: 1_400 }, // 4,500's window starts at 3,500: after every stall
      ],
    );
    expect(refusalsNotFromStalls(stats, allowance)).toEqual({
      unexplained: [
        { key: 'k', at: 2_000 },
        { key: 'k', at: 4_100 },
        { key: 'k', at: 4_500 },
      ],
      fromStalls: 0,
    });
  });
});

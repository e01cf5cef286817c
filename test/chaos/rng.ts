// A seeded generator for chaos schedules: the same seed gives the same sequence of faults, so a
// failing run can be replayed (process timing still varies, the plan does not).
import { seededRandom } from '../../src/simulator/vehicle.js';

/** mulberry32, the simulator's own seeded generator: floats in [0, 1). */
export const mulberry32 = seededRandom;

export function uniform(rng: () => number, min: number, max: number): number {
  return min + rng() * (max - min);
}

/** A shuffled copy (Fisher–Yates). */
export function shuffle<T>(rng: () => number, items: readonly T[]): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(rng() * (i + 1));
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

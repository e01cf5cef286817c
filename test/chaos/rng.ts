// A seeded generator for chaos schedules: the same seed gives the same sequence of faults, so a
// failing run can be replayed (process timing still varies, the plan does not).

/** mulberry32: small, fast, good enough for test schedules. Returns floats in [0, 1). */
export function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

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

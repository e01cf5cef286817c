import { describe, expect, it } from 'vitest';
import { PlateMap, plateCode } from '../../src/producers/plate-map.js';

// Its bytes per plate over 1,000,000 plates is a benchmark figure (npm run bench: "dedup table"), not a test.
describe('PlateMap', () => {
  it('packs every valid plate into a distinct 32-bit code', () => {
    expect(plateCode('AAA0000')).toBe(0);
    expect(plateCode('ZZZ9Z99')).toBe(632_735_999);
    expect(plateCode('ZZZ9Z99')).toBeLessThan(2 ** 32);
    // Old and Mercosul forms differ only in the 5th character: digits and letters never collide.
    const seen = new Set<number>();
    for (const p of ['ABC1234', 'ABC1C34', 'ABC1A34', 'ABC1034', 'ABD1234', 'BBC1234', 'ABC1235'])
      seen.add(plateCode(p));
    expect(seen.size).toBe(7);
  });

  it('stores, finds and grows past its first size without losing anything', () => {
    const table = new PlateMap(4);
    for (let i = 0; i < 50_000; i++) expect(table.add(i * 12_653, i + 1)).toBe(true);
    expect(table.size).toBe(50_000);
    expect(table.add(12_653 * 7, 0)).toBe(false);
    for (let i = 0; i < 50_000; i += 997) expect(table.get(i * 12_653)).toBe(i + 1);
    expect(table.has(1)).toBe(false);
  });
});

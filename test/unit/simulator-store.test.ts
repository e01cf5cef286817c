import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { describe, expect, it } from 'vitest';
import { IndexCounter, PlateCounter } from '../../src/simulator/stats.js';
import { packPlate, QueryStore, unpackPlate } from '../../src/simulator/store.js';

describe('plate packing', () => {
  it('round-trips both formats and keeps them apart', () => {
    for (const plate of ['AAA0000', 'ZZZ9999', 'ZZZ9Z99', 'ABC1D23', 'ABC1234', 'ABC1C34', 'QWE0A00']) {
      expect(unpackPlate(packPlate(plate))).toBe(plate);
    }
    expect(packPlate('ABC1234')).not.toBe(packPlate('ABC1C34'));
    expect(packPlate('ZZZ9Z99')).toBeLessThan(2 ** 32);
    expect(() => packPlate('abc1234')).toThrow(RangeError);
  });
});

describe('QueryStore', () => {
  it('issues ids that name their query and rejects ids it did not issue', () => {
    const store = new QueryStore(1234);
    for (let i = 0; i < 3000; i += 1) store.add('ABC1D23', 1000 + i, 50, i % 2 === 0);
    const id = store.idOf(2500);
    expect(id).toMatch(/^q[0-9a-z]+-[0-9a-z]{4}$/);
    expect(store.indexOf(id)).toBe(2500);
    expect(store.get(2500)).toEqual({ index: 2500, plate: 'ABC1D23', createdAtMs: 3500, delayMs: 50, failed: true });
    expect(store.indexOf(store.idOf(2500).replace(/-.*/, '-0000'))).toBeUndefined();
    expect(store.indexOf('q' + (5000).toString(36) + '-abcd')).toBeUndefined();
    expect(store.indexOf('nonsense')).toBeUndefined();
    // Another instance (another salt) does not accept these ids.
    const other = new QueryStore(99);
    for (let i = 0; i < 3000; i += 1) other.add('ABC1D23', 0, 0, false);
    let accepted = 0;
    for (let i = 0; i < 3000; i += 1) if (other.indexOf(store.idOf(i)) !== undefined) accepted += 1;
    expect(accepted).toBeLessThan(5);
  });

  it('holds 200k queries in under 200 bytes each (store + per-plate and per-query counters)', () => {
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const used = () => {
      gc();
      gc();
      const m = process.memoryUsage();
      return m.heapUsed + m.arrayBuffers;
    };
    const n = 200_000;
    // Plates made up front (they are the caller's strings, not the store's cost).
    const plates: string[] = [];
    for (let i = 0; i < n; i += 1) plates.push(unpackPlate((i * 3163) % 632_736_000));
    const before = used();
    const store = new QueryStore(7);
    const perPlate = new PlateCounter();
    const perQuery = new IndexCounter();
    for (let i = 0; i < n; i += 1) {
      const index = store.add(plates[i]!, 1_900_000_000_000 + i, 5000 + (i % 10_000), i % 50 === 0);
      perPlate.add(packPlate(plates[i]!));
      perQuery.add(index);
    }
    const bytesPerQuery = (used() - before) / n;
    console.log(`simulator store: ${bytesPerQuery.toFixed(1)} bytes per query (${n} queries, all distinct plates)`);
    expect(store.size).toBe(n);
    expect(perPlate.duplicates).toBe(0);
    expect(store.get(n - 1)?.plate).toBe(plates[n - 1]);
    expect(bytesPerQuery).toBeLessThan(200);
  });
});

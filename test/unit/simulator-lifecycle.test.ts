import { describe, expect, it } from 'vitest';
import { chance, isForgotten, planCreate, statusAt } from '../../src/simulator/lifecycle.js';
import { fakeVehicle, seededRandom } from '../../src/simulator/vehicle.js';

const base = { completionMs: [100, 400] as const, failRate: 0, failPlates: new Set<string>(), terminalOnCreateRate: 0 };

describe('planCreate', () => {
  it('draws the completion delay within the configured range', () => {
    const random = seededRandom(1);
    const delays = Array.from({ length: 500 }, () => planCreate('ABC1D23', base, random).delayMs);
    expect(Math.min(...delays)).toBeGreaterThanOrEqual(100);
    expect(Math.max(...delays)).toBeLessThanOrEqual(400);
    expect(Math.max(...delays) - Math.min(...delays)).toBeGreaterThan(250);
  });

  it('fails listed plates always and others at failRate', () => {
    const random = seededRandom(2);
    expect(planCreate('BAD0000', { ...base, failPlates: new Set(['BAD0000']) }, random).failed).toBe(true);
    const failed = Array.from(
      { length: 2000 },
      () => planCreate('ABC1D23', { ...base, failRate: 0.25 }, random).failed,
    ).filter(Boolean).length;
    expect(failed).toBeGreaterThan(400);
    expect(failed).toBeLessThan(600);
  });

  it('answers terminal at creation with zero delay at terminalOnCreateRate 1', () => {
    expect(planCreate('ABC1D23', { ...base, terminalOnCreateRate: 1 }, () => 0.5)).toEqual({
      delayMs: 0,
      failed: false,
      terminalOnCreate: true,
    });
  });

  it('chance decides 0 and 1 without drawing', () => {
    const never = () => {
      throw new Error('drew');
    };
    expect(chance(0, never)).toBe(false);
    expect(chance(1, never)).toBe(true);
    expect(chance(0.5, () => 0.49)).toBe(true);
    expect(chance(0.5, () => 0.5)).toBe(false);
  });
});

describe('statusAt', () => {
  const query = { createdAtMs: 1000, delayMs: 250, failed: false };
  it('is PROCESSING until createdAt + delay, then terminal with completedAt', () => {
    expect(statusAt(query, 1249)).toEqual({ status: 'PROCESSING' });
    expect(statusAt(query, 1250)).toEqual({ status: 'COMPLETED', completedAtMs: 1250 });
    expect(statusAt({ ...query, failed: true }, 5000)).toEqual({ status: 'FAILED', completedAtMs: 1250 });
  });

  it('forgets a query ttl after its creation', () => {
    expect(isForgotten(query, null, 1e12)).toBe(false);
    expect(isForgotten(query, 500, 1499)).toBe(false);
    expect(isForgotten(query, 500, 1500)).toBe(true);
  });
});

describe('fakeVehicle', () => {
  it('is a pure function of the plate, the same for its old and Mercosul forms', () => {
    expect(fakeVehicle('ABC1D23')).toEqual(fakeVehicle('ABC1D23'));
    const { plate: _a, ...old } = fakeVehicle('ABC1234');
    const { plate: _b, ...mercosul } = fakeVehicle('ABC1C34');
    expect(old).toEqual(mercosul);
    expect(fakeVehicle('ABC1D23')).not.toEqual({ ...fakeVehicle('XYZ9K87'), plate: 'ABC1D23' });
  });

  it('masks chassis and renavam', () => {
    const v = fakeVehicle('QWE4R56');
    expect(v.chassis).toMatch(/^9B[A-Z0-9]\*{10}[A-Z0-9]{4}$/);
    expect(v.renavam).toMatch(/^\*{7}\d{4}$/);
    expect(v.year).toBeGreaterThanOrEqual(1995);
    expect(v.uf).toMatch(/^[A-Z]{2}$/);
  });
});

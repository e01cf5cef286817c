// The cold gate's producer turns (bench/cold.ts oneAtATime): vqb's enqueue and BullMQ's addBulk run
// in one process whose CPU each is measured by, so the two must never overlap, and one that fails
// must not hold the other back.
import { describe, expect, it } from 'vitest';
import { oneAtATime } from '../../bench/cold.js';

describe('oneAtATime', () => {
  it('runs each section after the one before has ended, in the order asked, and passes its value on', async () => {
    const turns = oneAtATime();
    const events: string[] = [];
    const section = (name: string, ticks: number) =>
      turns(async () => {
        events.push(`${name} in`);
        for (let i = 0; i < ticks; i++) await Promise.resolve();
        events.push(`${name} out`);
        return name;
      });
    const values = await Promise.all([section('a', 5), section('b', 1), section('c', 3)]);
    expect(values).toEqual(['a', 'b', 'c']);
    expect(events).toEqual(['a in', 'a out', 'b in', 'b out', 'c in', 'c out']);
  });

  it('a section that throws reaches its caller, and the next still runs', async () => {
    const turns = oneAtATime();
    const failed = turns(async () => {
      throw new Error('enqueue refused');
    });
    const next = turns(async () => 'ran');
    await expect(failed).rejects.toThrow('enqueue refused');
    await expect(next).resolves.toBe('ran');
  });
});

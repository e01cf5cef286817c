// How long a process leaves a busy account unfed after a feed that found its queue full
// (Feeder.restMs): fast accounts keep the feed period, slow ones rest up to 2 s (issue 21).
import { describe, expect, it } from 'vitest';
import type { Accounts } from '../../src/queue/accounts.js';
import { Feeder } from '../../src/queue/feeder.js';
import type { InFlight } from '../../src/queue/inflight.js';
import type { Scheduler } from '../../src/queue/scheduler.js';
import { parseRateLimit } from '../../src/setting-values.js';

function feederFor(rateLimit: string): Feeder {
  const account = { id: 'a', rateLimit: parseRateLimit(rateLimit)! };
  const accounts = { for: () => ({ account }) } as unknown as Pick<Accounts, 'for'>;
  return new Feeder({} as Scheduler, accounts, {} as InFlight);
}

describe('Feeder.restMs', () => {
  it('keeps feeding an account at 8/s or more every period', () => {
    expect(feederFor('20/s').restMs('a', undefined, 200)).toBe(200);
    expect(feederFor('8/s').restMs('a', undefined, 200)).toBe(200);
  });

  it('rests a slow account up to 2 s: its queue holds many seconds of its creates', () => {
    // 4 creates at 12/min last 20 s: a quarter of that is past the 2 s cap.
    expect(feederFor('12/min').restMs('a', undefined, 200)).toBe(2_000);
    // 4 creates at 2/s last 2 s: rest half a second.
    expect(feederFor('2/s').restMs('a', undefined, 200)).toBe(500);
  });

  it('follows the rate in force when the caller knows it (a learned rate), not the configured one', () => {
    // `auto` starts at 1/s; learned 12/min: the rest follows the learned rate.
    expect(feederFor('1/s').restMs('a', 12 / 60, 200)).toBe(2_000);
    expect(feederFor('12/min').restMs('a', 40, 200)).toBe(200);
  });
});

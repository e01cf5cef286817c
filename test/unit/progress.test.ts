// Issue 15, CLI: the ETA must not jump with every wave of finished plates, and a log line written
// while the progress bar is on screen must not land in the middle of it.
import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createProgress, createTicker, etaMs, nextRate, type RateState } from '../../src/commands/progress.js';
import { createLogger } from '../../src/logger.js';
import type { BatchInfo } from '../../src/queue/batch/store.js';
import { captureLogs } from '../helpers/logs.js';

const TOTAL = 800;

/**
 * A batch of 800 plates finishing at 2 plates/s on average, in waves at irregular times (1 to 12 s
 * apart, each wave the plates of its gap), sampled every 500 ms as `vqb run` does.
 */
function wavySamples(): [at: number, finished: number][] {
  const gaps = [1, 9, 2, 12, 3, 1, 11, 4, 8, 2, 12, 1, 6, 10, 2, 3, 12, 5, 1, 7];
  const samples: [number, number][] = [];
  let finished = 0;
  let wave = 0;
  let next = gaps[0]! * 1000;
  for (let at = 0; finished < TOTAL; at += 500) {
    if (at === next) {
      finished = Math.min(TOTAL, finished + 2 * gaps[wave % gaps.length]!);
      wave++;
      next += gaps[wave % gaps.length]! * 1000;
    }
    samples.push([at, finished]);
  }
  return samples;
}

/** The ETA shown, as a share of the true remaining time at the average rate (1 = exact). */
const share = (eta: number, finished: number) => eta / (((TOTAL - finished) / 2) * 1000);

describe('the ETA', () => {
  it('stays within a band of the true remaining time while plates finish in waves', () => {
    let state: RateState | undefined;
    const shares: number[] = [];
    for (const [at, finished] of wavySamples()) {
      state = nextRate(state, at, finished);
      if (at >= 30_000 && finished < TOTAL) shares.push(share(etaMs(state, TOTAL - finished), finished));
    }
    expect(shares.length).toBeGreaterThan(600);
    expect(Math.min(...shares)).toBeGreaterThan(0.75);
    expect(Math.max(...shares)).toBeLessThan(1.6);
    // After the first minute the estimate has settled.
    const settled = shares.slice(60);
    expect(Math.min(...settled)).toBeGreaterThan(0.8);
    expect(Math.max(...settled)).toBeLessThan(1.4);
  });

  it('follows a slowdown that lasts, and does not count a sample twice', () => {
    let state = nextRate(undefined, 0, 0);
    for (let at = 500; at <= 120_000; at += 500) state = nextRate(state, at, at / 100); // 10/s
    expect(etaMs(state, 100)).toBeCloseTo(10_000, -2);
    expect(nextRate(state, 120_000, 5_000)).toBe(state); // same instant: nothing learned
    for (let at = 120_500; at <= 300_000; at += 500) state = nextRate(state, at, 1_200 + (at - 120_000) / 1000); // now 1/s, for 6 time constants
    expect(etaMs(state, 100)).toBeGreaterThan(90_000);
    expect(etaMs(state, 100)).toBeLessThan(110_000);
    expect(etaMs(state, 0)).toBe(0);
    expect(etaMs(nextRate(nextRate(undefined, 0, 5), 500, 5), 10)).toBeNaN(); // nothing finished yet: unknown
  });

  it('is what the progress lines report (non-terminal output)', () => {
    let clock = 0;
    const logs = captureLogs('info');
    const progress = createProgress(new Writable({ write: (_c, _e, done) => done() }), logs.logger, {
      now: () => clock,
      logEveryMs: 0,
    });
    const reported: { at: number; finished: number; etaSec: number | null }[] = [];
    for (const [at, finished] of wavySamples()) {
      clock = at;
      progress.update(batch(finished), { account: 'default', paused: false, rateLimit: '60/min' });
      const line = logs.lines.at(-1) as { etaSec: number | null };
      reported.push({ at, finished, etaSec: line.etaSec });
    }
    for (const { at, finished, etaSec } of reported) {
      if (at < 30_000 || finished >= TOTAL) continue;
      expect(etaSec, `at ${at / 1000} s`).not.toBeNull();
      expect(share((etaSec ?? 0) * 1000, finished), `at ${at / 1000} s`).toBeGreaterThan(0.7);
      expect(share((etaSec ?? 0) * 1000, finished), `at ${at / 1000} s`).toBeLessThan(1.6);
    }
  });
});

describe('an early ETA (issue 46, 9)', () => {
  function printedAt(samples: [number, number][], rate?: number): string[] {
    let clock = 0;
    const printed: string[] = [];
    const progress = createProgress(
      new Writable({ write: (_c, _e, done) => done() }),
      createLogger({ level: 'silent' }),
      {
        now: () => clock,
        logEveryMs: 0,
        print: (text) => printed.push(text),
      },
    );
    const line = {
      account: 'default',
      paused: false,
      rateLimit: '40/s',
      ...(rate !== undefined ? { rate: { perSecond: rate, source: 'configured' as const } } : {}),
    };
    for (const [at, finished] of samples) {
      clock = at;
      progress.update(batch(finished), line);
    }
    return printed;
  }

  it('comes from the account pace until completions mean something, not from the first wave', () => {
    // 800 plates at 40 requests/s (about 20 plates/s): about 40 s; the first poll answers at 15 s.
    const printed = printedAt(
      [
        [0, 0],
        [5_000, 0],
        [15_000, 5],
      ],
      40,
    );
    expect(printed[0]).toMatch(/about 40 s left/);
    // The rate since the start (5 plates in 15 s) would say 40 min; the pace says under a minute.
    expect(printed.at(-1)).toMatch(/about 40 s left/);
  });

  it('says it is measuring when no pace is known yet', () => {
    expect(
      printedAt([
        [0, 0],
        [5_000, 1],
      ]).at(-1),
    ).toMatch(/, measuring the rate$/);
  });
});

describe('a batch held at its spending cap', () => {
  it('says so on the progress line, and gives no ETA that grows while nothing may move', () => {
    let clock = 0;
    const printed: string[] = [];
    const progress = createProgress(
      new Writable({ write: (_c, _e, done) => done() }),
      createLogger({ level: 'silent' }),
      {
        now: () => clock,
        logEveryMs: 0,
        print: (text) => printed.push(text),
      },
    );
    const line = { account: 'default', paused: false, rateLimit: '60/min' };
    for (let at = 0; at <= 60_000; at += 500) {
      clock = at;
      progress.update(
        { ...batch(Math.min(8, at / 500)), maxCreates: 8, ...(at >= 4_000 ? { blocked: 'budget' } : {}) },
        line,
      );
    }
    const last = printed.at(-1)!;
    expect(last).toMatch(/^progress 8\/800 \(8 done, 0 failed\)/);
    expect(last).toContain(
      'creates wait: the batch reached its cap of 8 creates (raise it with `vqb budget b --max-creates N`; polls go on)',
    );
    expect(last).not.toMatch(/left/);
  });
});

function batch(finished: number): BatchInfo {
  return {
    id: 'b',
    account: 'default',
    priority: 'normal',
    weight: 1,
    source: 'file',
    name: 'b.csv',
    createdAt: 0,
    sealed: true,
    metadata: {},
    extraColumns: [],
    product: 'agregados',
    reuseWithinMs: 0,
    counts: {
      total: TOTAL,
      enqueued: TOTAL,
      done: finished,
      failed: 0,
      inflight: 0,
      queued: TOTAL - finished,
      rejected: 0,
      duplicates: 0,
    } as BatchInfo['counts'],
  };
}

/** Just enough of a terminal: text overwrites at the cursor, \r goes to column 0, ESC[2K clears the line. */
function terminal() {
  const lines: string[] = [''];
  let col = 0;
  const feed = (text: string) => {
    for (let i = 0; i < text.length; i++) {
      if (text.startsWith('\x1b[2K', i)) {
        lines[lines.length - 1] = '';
        i += 3;
      } else if (text[i] === '\r') col = 0;
      else if (text[i] === '\n') {
        lines.push('');
        col = 0;
      } else {
        const line = lines[lines.length - 1]!;
        lines[lines.length - 1] = line.slice(0, col).padEnd(col) + text[i] + line.slice(col + 1);
        col++;
      }
    }
  };
  const stream = (isTTY: boolean) =>
    Object.assign(
      new Writable({
        decodeStrings: false,
        write(chunk: string | Buffer, _enc, done) {
          feed(chunk.toString());
          done();
        },
      }),
      { isTTY, columns: 200 },
    );
  return { stdout: stream(true), stderr: stream(true), lines };
}

describe('the progress bar on a terminal', () => {
  it('steps aside for a log line: the line is whole, the bar is drawn again below it', () => {
    const term = terminal();
    const status = createTicker(term.stdout);
    const logger = createLogger({ level: 'warn' }, status.logs(term.stderr));
    const progress = createProgress(term.stdout, logger, { now: () => 0, ticker: status });
    progress.update(batch(100), { account: 'default', paused: false, rateLimit: '60/min' });
    logger.warn('upstream asked to wait: all workers hold for 2000 ms');
    progress.update(batch(200), { account: 'default', paused: false, rateLimit: '60/min' });
    logger.warn('second warning');
    progress.finish();
    logger.warn('after the bar');

    const lines = term.lines.filter((l) => l !== '');
    expect(lines).toHaveLength(4);
    expect(JSON.parse(lines[0]!)).toMatchObject({
      level: 40,
      msg: 'upstream asked to wait: all workers hold for 2000 ms',
    });
    expect(JSON.parse(lines[1]!)).toMatchObject({ msg: 'second warning' });
    expect(lines[2]).toMatch(/^█+░+ 200\/800 \(200 done, 0 failed\)/);
    expect(JSON.parse(lines[3]!)).toMatchObject({ msg: 'after the bar' });
  });
});

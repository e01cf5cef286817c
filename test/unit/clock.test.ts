// One clock (issue 45): src/ and workers/ read the time and set timers through src/clock.ts only,
// so what a module asks of time is in one place a test can see. (The pace's own clock is Redis
// TIME, in its scripts: test/integration/pace-clock.test.ts.)
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { clock } from '../../src/clock.js';

const ROOT = join(import.meta.dirname, '../..');

function sources(dir: string): string[] {
  return readdirSync(join(ROOT, dir)).flatMap((name) => {
    const path = join(dir, name);
    return statSync(join(ROOT, path)).isDirectory() ? sources(path) : name.endsWith('.ts') ? [path] : [];
  });
}

describe('the clock', () => {
  it('is the only module of src/ and workers/ that reads Date.now or performance.now, sets or clears a timer or sleeps with node:timers', () => {
    const files = [...sources('src'), ...sources('workers')].filter((f) => f !== 'src/clock.ts');
    expect(files.length).toBeGreaterThan(150);
    const found = files.flatMap((file) =>
      readFileSync(join(ROOT, file), 'utf8')
        .split('\n')
        .flatMap((line, i) =>
          /Date\.now\b|performance\.now\b|node:timers|(?<![\w.$#])(set|clear)(Timeout|Interval)\(/.test(line)
            ? [`${file}:${i + 1}: ${line.trim()}`]
            : [],
        ),
    );
    expect(found).toEqual([]);
  });

  it('tells the wall time and a monotonic time, and runs timers', async () => {
    const before = Date.now();
    expect(Math.abs(clock.now() - before)).toBeLessThan(1_000);
    const m = clock.monotonic();
    await new Promise((resolve) => clock.setTimeout(resolve, 5));
    expect(clock.monotonic()).toBeGreaterThanOrEqual(m);
  });

  it("the worker process's parts run on the clock handed down from services.ts, not the process clock they import", () => {
    // workers/ may name the process clock only as a default (a part built outside a worker, in a
    // test); every reading, sleep and timer goes through the clock it was given.
    const found = sources('workers').flatMap((file) =>
      readFileSync(join(ROOT, file), 'utf8')
        .split('\n')
        .flatMap((line, i) =>
          /(?<![#\w.])(clock|processClock)\.(now|monotonic|sleep|setTimeout|setInterval)\(/.test(line)
            ? [`${file}:${i + 1}: ${line.trim()}`]
            : [],
        ),
    );
    expect(found).toEqual([]);
  });

  it('sleeps, and a stop cuts a sleep short', async () => {
    await clock.sleep(1);
    const stop = new AbortController();
    const sleeping = clock.sleep(60_000, stop.signal);
    stop.abort();
    await expect(sleeping).rejects.toThrow();
  });

  it('a time already past runs at once, with no TimeoutNegativeWarning printed', async () => {
    const warnings: string[] = [];
    const listen = (w: Error) => warnings.push(w.name);
    process.on('warning', listen);
    try {
      await new Promise((resolve) => clock.setTimeout(resolve, -13));
      await clock.sleep(-13);
      // A warning is emitted on the next tick: give it one.
      await new Promise((resolve) => setImmediate(resolve));
    } finally {
      process.off('warning', listen);
    }
    expect(warnings).toEqual([]);
  });
});

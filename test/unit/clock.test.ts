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
  it('is the only module of src/ and workers/ that calls Date.now(), performance.now(), setTimeout( or setInterval(', () => {
    const files = [...sources('src'), ...sources('workers')].filter((f) => f !== 'src/clock.ts');
    expect(files.length).toBeGreaterThan(150);
    const found = files.flatMap((file) =>
      readFileSync(join(ROOT, file), 'utf8')
        .split('\n')
        .flatMap((line, i) =>
          /Date\.now\(|performance\.now\(|(?<![\w.$])setTimeout\(|(?<![\w.$])setInterval\(/.test(line)
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
});

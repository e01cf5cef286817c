#!/usr/bin/env node
// `npm test`'s suite in two lanes at once (vitest.config.ts: the projects `paced` and `rest`): the
// suite is mostly waiting (on paced keys, on timers, on child processes), so two lanes fill a
// 2-core machine's time where one file at a time left it idle (26.5 min serial, 22.2 in two lanes).
// The pacing tests are all in one lane, so two of them never share the machine. Each line is
// prefixed with its lane; the exit code is the first failing lane's (0 when both pass). Extra
// arguments go to both lanes (a file filter, `-t NAME`). A failing lane's failures are printed again
// at the very end, as is each test passed only on a retry, because CI keeps only the tail of a long run
// and the lanes' lines interleave.
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';

// `rest` is mostly waiting (child processes, servers, timers): VQ_TEST_WORKERS=3 runs its files three
// at a time (each has its own Redis prefix, simulator and temp dirs): 10 min in all where one at a
// time takes 17-22. Not the default: the machine's load it adds made pacing tests fail twice in a
// fresh-clone CI run (a pool's shared-quota guess, a key's expiry settling late), see
// docs/development.md. `paced` stays one file at a time.
const LANES = ['paced', 'rest'];
const restWorkers = Number(process.env.VQ_TEST_WORKERS ?? '1');
const PARALLEL = { paced: [], rest: restWorkers > 1 ? ['--fileParallelism', '--maxWorkers', String(restWorkers)] : [] };
const args = process.argv.slice(2);
const vitest = new URL('../node_modules/vitest/vitest.mjs', import.meta.url).pathname;

function lane(name) {
  return new Promise((resolve) => {
    const started = Date.now();
    const lines = [];
    const child = spawn(
      process.execPath,
      [vitest, 'run', '--project', name, '--passWithNoTests', ...PARALLEL[name], ...args],
      {
        stdio: ['ignore', 'pipe', 'pipe'],
        env: { ...process.env, FORCE_COLOR: process.env.FORCE_COLOR ?? '0' },
      },
    );
    for (const stream of [child.stdout, child.stderr]) {
      const out = stream === child.stdout ? process.stdout : process.stderr;
      createInterface({ input: stream }).on('line', (line) => {
        lines.push(line);
        out.write(`[${name}] ${line}\n`);
      });
    }
    child.on('close', (code, signal) => {
      const s = Math.round((Date.now() - started) / 1000);
      console.log(`[${name}] lane ended: ${signal ?? `exit ${code}`} after ${s} s`);
      resolve({ name, code: code ?? 1, lines, s });
    });
  });
}

// What vitest says about failures: its "Failed Tests" / "Failed Suites" section to the summary, or,
// where it printed none (a crash), the lines naming a failing file or test.
function failures(lines) {
  const plain = lines.map((l) => l.replace(/\x1b\[[0-9;]*m/g, ''));
  const from = plain.findIndex((l) => /Failed (Tests|Suites) \d+/.test(l));
  if (from >= 0) return plain.slice(from, from + 300);
  return plain.filter((l) => /\bFAIL\b|×|Error/.test(l)).slice(0, 100);
}

const ended = await Promise.all(LANES.map(lane));
// Tests that passed only on a retry (the paced lane's; test/helpers/retried-reporter.ts), named last too.
for (const { name, lines } of ended)
  for (const line of lines.filter((l) => l.includes('RETRIED '))) console.log(`[${name}] ${line.trim()}`);
for (const { name, code, lines, s } of ended.filter((l) => l.code !== 0)) {
  console.log(`\n[${name}] ===== lane failed (exit ${code} after ${s} s); its failures again =====`);
  for (const line of failures(lines)) console.log(`[${name}] ${line}`);
}
process.exit(ended.find((l) => l.code !== 0)?.code ?? 0);

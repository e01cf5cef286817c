#!/usr/bin/env node
// `npm test`'s suite in two lanes at once (vitest.config.ts: the projects `paced` and `rest`), each
// lane one file at a time: the suite is mostly waiting (on paced keys, on timers, on child
// processes), so two lanes fill a 2-core machine's time where one left it idle (31 min serial).
// The pacing tests are all in one lane, so two of them never share the machine. Each line is
// prefixed with its lane; the exit code is the first failing lane's (0 when both pass). Extra
// arguments go to both lanes (a file filter, `-t NAME`).
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';

const LANES = ['paced', 'rest'];
const args = process.argv.slice(2);
const vitest = new URL('../node_modules/vitest/vitest.mjs', import.meta.url).pathname;

function lane(name) {
  return new Promise((resolve) => {
    const started = Date.now();
    const child = spawn(process.execPath, [vitest, 'run', '--project', name, '--passWithNoTests', ...args], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, FORCE_COLOR: process.env.FORCE_COLOR ?? '0' },
    });
    for (const stream of [child.stdout, child.stderr]) {
      const out = stream === child.stdout ? process.stdout : process.stderr;
      createInterface({ input: stream }).on('line', (line) => out.write(`[${name}] ${line}\n`));
    }
    child.on('close', (code, signal) => {
      const s = Math.round((Date.now() - started) / 1000);
      console.log(`[${name}] lane ended: ${signal ?? `exit ${code}`} after ${s} s`);
      resolve(code ?? 1);
    });
  });
}

const codes = await Promise.all(LANES.map(lane));
process.exit(codes.find((c) => c !== 0) ?? 0);

#!/usr/bin/env node
// Thin launcher: the compiled CLI lives in dist/ (run `npm run build` first).
import { main } from '../dist/src/cli.js';

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
    // A command that has returned is done: a connection still retrying a Redis that went away, or
    // any other leftover handle, must not keep the process alive (the timer itself does not).
    setTimeout(() => process.exit(code), 3_000).unref();
  },
  (err) => {
    process.stderr.write(`vqb: ${err?.message ?? err}\n`);
    process.exitCode = 1;
  },
);

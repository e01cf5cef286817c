#!/usr/bin/env node
// Thin launcher: the compiled CLI lives in dist/ (run `npm run build` first).
//
// The Node version is checked before anything is imported: on an older Node the dependencies
// (undici first) die at import time with a stack trace that says nothing about the cause. This
// file therefore uses only syntax every Node since 14 parses, and imports the CLI dynamically.
const NEEDED_MAJOR = 24;
// Tests only: pretends to be another Node version (docs/development.md); the real check reads
// process.versions.node.
const version = process.env.VQB_TEST_NODE_VERSION || process.versions.node;
const major = Number(version.split('.')[0]);

if (!(major >= NEEDED_MAJOR)) {
  process.stderr.write(
    `vqb: needs Node.js 24 LTS or newer (this is Node ${version}); get it with \`nvm install 24\`` +
      ' (the clone has an .nvmrc) or from https://nodejs.org\n',
  );
  process.exit(2);
}

// Tracing (OpenTelemetry) starts before the CLI is imported, and only when an OTEL_* exporter is
// set (src/telemetry/boot.ts); its spans are flushed when the command returns.
let telemetry;
import('../dist/src/telemetry/boot.js')
  .then(({ boot }) => boot(process.env))
  .then((started) => {
    telemetry = started;
    return import('../dist/src/cli.js');
  })
  .then(({ main }) => main(process.argv.slice(2)))
  .then(async (code) => {
    await telemetry?.stop().catch(() => {});
    return code;
  })
  .then(
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

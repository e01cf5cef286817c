// `node --import` this file, then a program: when the program exits, every module it resolved
// (ESM and CommonJS, node: built-ins too) is written to stderr on one line, `LOADED <json>`
// (cli-start.test.ts reads it).
import { writeSync } from 'node:fs';
import { registerHooks } from 'node:module';

const seen = new Set();
registerHooks({
  resolve(specifier, context, next) {
    const resolved = next(specifier, context);
    seen.add(resolved.url);
    return resolved;
  },
});
process.on('exit', () => writeSync(2, `\nLOADED ${JSON.stringify([...seen])}\n`));

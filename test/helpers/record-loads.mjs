// `node --import` this file, then a program: when the program exits, every module it resolved
// (ESM and CommonJS, node: built-ins too) is written as a JSON array to the file named by
// VQB_LOADS_FILE (process.ts modulesLoadedBy). A file, not stderr: the list is over 100 KB, more
// than a pipe takes in one synchronous write at exit.
import { writeFileSync } from 'node:fs';
import { registerHooks } from 'node:module';

const seen = new Set();
registerHooks({
  resolve(specifier, context, next) {
    const resolved = next(specifier, context);
    seen.add(resolved.url);
    return resolved;
  },
});
process.on('exit', () => writeFileSync(process.env.VQB_LOADS_FILE, JSON.stringify([...seen])));

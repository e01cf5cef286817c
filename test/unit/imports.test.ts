// The layout shows the data flow (front doors → producers → queue → workers → sinks): these rules
// are read off the code's imports, so a shortcut that breaks them fails here, not in a review.
// Issue 23: no import circle in src/; the front doors (api/, console/) are siblings; queue/ does
// not reach into sinks/.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(import.meta.dirname, '../..');
const SRC = join(ROOT, 'src');

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return files(path);
    return name.endsWith('.ts') ? [path] : [];
  });
}

/** Each src file → the src files it imports at run time (`import type` is left out: it leaves no trace in the build). */
function graph(): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const file of files(SRC)) {
    const text = readFileSync(file, 'utf8');
    const targets: string[] = [];
    for (const m of text.matchAll(/^(?:import|export)\s+(type\s+)?[^'"]*?from\s+'(\.[^']+)'/gm)) {
      if (m[1]) continue;
      const target = resolve(dirname(file), m[2]!.replace(/\.js$/, '.ts'));
      if (target.startsWith(SRC)) targets.push(target);
    }
    for (const m of text.matchAll(/import\('(\.[^']+)'\)/g))
      targets.push(resolve(dirname(file), m[1]!.replace(/\.js$/, '.ts')));
    out.set(file, targets);
  }
  return out;
}

const rel = (file: string) => relative(SRC, file);

/** Every import circle, each once, as a list of files. */
function cycles(g: Map<string, string[]>): string[][] {
  const found: string[][] = [];
  const state = new Map<string, 'open' | 'done'>();
  const stack: string[] = [];
  const visit = (file: string) => {
    state.set(file, 'open');
    stack.push(file);
    for (const next of g.get(file) ?? []) {
      if (state.get(next) === 'open') found.push(stack.slice(stack.indexOf(next)).map(rel));
      else if (!state.has(next)) visit(next);
    }
    stack.pop();
    state.set(file, 'done');
  };
  for (const file of g.keys()) if (!state.has(file)) visit(file);
  return found;
}

function crossings(g: Map<string, string[]>, from: string, to: string): string[] {
  return [...g.entries()].flatMap(([file, targets]) =>
    rel(file).startsWith(`${from}/`)
      ? targets.filter((t) => rel(t).startsWith(`${to}/`)).map((t) => `${rel(file)} → ${rel(t)}`)
      : [],
  );
}

describe('the import graph of src/', () => {
  const g = graph();

  it('reads the whole tree', () => {
    expect(g.size).toBeGreaterThan(100);
  });

  it('has no import circle', () => {
    expect(cycles(g)).toEqual([]);
  });

  it('keeps the front doors siblings: console/ and api/ do not import each other', () => {
    expect([...crossings(g, 'console', 'api'), ...crossings(g, 'api', 'console')]).toEqual([]);
  });

  it('has one way in for a batch: only producers/enqueue.ts imports the ingest, and every front door imports enqueue', () => {
    const importers = (target: string) =>
      [...g.entries()]
        .filter(([, targets]) => targets.includes(join(SRC, target)))
        .map(([file]) => rel(file))
        .sort();
    expect(importers('producers/ingest.ts')).toEqual(['producers/enqueue.ts']);
    const doors = [
      'api/routes/batches.ts',
      'commands/run.ts',
      'console/routes.ts',
      'index.ts',
      'producers/inbox-intake.ts',
    ];
    expect(doors.filter((door) => !importers('producers/enqueue.ts').includes(door))).toEqual([]);
  });

  it('keeps queue/ below sinks/: queue/ imports nothing of sinks/', () => {
    expect(crossings(g, 'queue', 'sinks')).toEqual([]);
  });
});

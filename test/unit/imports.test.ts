// The layout shows the data flow (front doors → producers → queue → workers → sinks): these rules
// are read off the code's imports, so a shortcut that breaks them fails here, not in a review.
// Issue 23: no import circle in src/; the front doors (api/, console/) are siblings; queue/ does
// not reach into sinks/.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(import.meta.dirname, '../..');
const SRC = join(ROOT, 'src');
/** The worker processes' code, beside src/ (the design card's layout): the front starts them. */
const WORKERS = join(ROOT, 'workers');
const inTree = (path: string) => path.startsWith(`${SRC}/`) || path.startsWith(`${WORKERS}/`);

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return files(path);
    return name.endsWith('.ts') ? [path] : [];
  });
}

interface Edge {
  target: string;
  /** `import type`, or braces that hold types alone: no trace in the build. */
  typeOnly: boolean;
  names: string;
}

/** Each src file → the src files it imports, each import marked type-only or not. */
function edges(): Map<string, Edge[]> {
  const out = new Map<string, Edge[]>();
  for (const file of [...files(SRC), ...files(WORKERS)]) {
    const text = readFileSync(file, 'utf8');
    const found: Edge[] = [];
    for (const m of text.matchAll(/^(?:import|export)\s+(type\s+)?([^'";]*?)from\s+'(\.[^']+)'/gms)) {
      const target = resolve(dirname(file), m[3]!.replace(/\.js$/, '.ts'));
      if (!inTree(target)) continue;
      const names = m[2]!.trim().replace(/\s+/g, ' ');
      found.push({ target, names, typeOnly: m[1] !== undefined || /^\{ ?(type \w+ ?,? ?)+\}$/.test(names) });
    }
    for (const m of text.matchAll(/import\('(\.[^']+)'\)/g))
      found.push({ target: resolve(dirname(file), m[1]!.replace(/\.js$/, '.ts')), names: 'import()', typeOnly: false });
    out.set(file, found);
  }
  return out;
}

/** Each src file → the src files it imports at run time (`import type` leaves no trace in the build). */
function graph(all = edges()): Map<string, string[]> {
  return new Map([...all].map(([file, es]) => [file, es.filter((e) => !e.typeOnly).map((e) => e.target)]));
}

/** Each src file → every src file it imports, types too. */
function anyGraph(all = edges()): Map<string, string[]> {
  return new Map([...all].map(([file, es]) => [file, es.map((e) => e.target)]));
}

/** A file's room path: `workers/…` for the top-level workers/, else its path inside src/. */
const rel = (file: string) =>
  file.startsWith(`${WORKERS}/`) ? `workers/${relative(WORKERS, file)}` : relative(SRC, file);

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

describe('the import graph of src/ and workers/', () => {
  const g = graph();

  it('reads the whole tree', () => {
    expect(g.size).toBeGreaterThan(100);
  });

  it('has no import circle, counting imports of types too', () => {
    expect(cycles(g)).toEqual([]);
    expect(cycles(anyGraph())).toEqual([]);
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

  it('keeps the worker processes at the top level: workers/ beside src/, imported only by the front', () => {
    expect(statSync(WORKERS).isDirectory()).toBe(true);
    expect(() => statSync(join(SRC, 'workers'))).toThrow();
    const front = ['cli.ts', 'index.ts', 'server.ts', 'commands/'];
    const importers = [...anyGraph()]
      .filter(
        ([file, targets]) => !rel(file).startsWith('workers/') && targets.some((t) => t.startsWith(`${WORKERS}/`)),
      )
      .map(([file]) => rel(file));
    expect(importers.length).toBeGreaterThan(0);
    expect(importers.filter((file) => !front.some((room) => file === room || file.startsWith(room)))).toEqual([]);
  });

  it("decides a request's own rules once: the batch-id rule, the pool check and the callback check are imported by enqueue only", () => {
    const importers = (target: string, name: string) =>
      [...edges()]
        .filter(([, es]) => es.some((e) => e.target === join(SRC, target) && new RegExp(`\\b${name}\\b`).test(e.names)))
        .map(([file]) => rel(file))
        .sort();
    expect(importers('queue/batch/store.ts', 'isBatchId')).toEqual(['commands/batch.ts', 'producers/enqueue.ts']);
    expect(importers('accounts/account.ts', 'poolFor')).toEqual(['producers/enqueue.ts']);
    expect(importers('webhooks/target.ts', 'checkCallbackUrl')).toEqual(['producers/enqueue.ts']);
  });

  it('loads exceljs only when a workbook is read or written: its code comes through excel.ts, by import()', () => {
    // A static import anywhere a command reaches put a quarter of a second of CPU (and 13 MiB) on
    // every start: `vqb status` took 0.82 s, 0.59 s without it.
    const texts = [...files(SRC), ...files(WORKERS)].map((file) => ({
      file: rel(file),
      text: readFileSync(file, 'utf8'),
    }));
    const statically = texts.filter(({ text }) => /^import\s+(?!type\s)[^;]*from\s+'exceljs'/m.test(text));
    expect(statically.map(({ file }) => file)).toEqual([]);
    const dynamically = texts.filter(({ text }) => text.includes("import('exceljs')"));
    expect(dynamically.map(({ file }) => file)).toEqual(['excel.ts']);
  });

  it('keeps queue/ below sinks/: queue/ imports nothing of sinks/', () => {
    expect(crossings(g, 'queue', 'sinks')).toEqual([]);
  });

  it('imports only downward between rooms at run time; the type-only imports back up are these', () => {
    const layerOf = (file: string) => {
      const path = rel(file);
      const i = LAYERS.findIndex((layer) => layer.some((room) => path === room || path.startsWith(room)));
      if (i < 0) throw new Error(`${path} stands in no layer: add it to LAYERS`);
      return i;
    };
    const up = [...edges()].flatMap(([file, es]) =>
      es
        .filter((e) => layerOf(e.target) < layerOf(file))
        .map((e) => `${e.typeOnly ? 'type' : 'RUN TIME'} ${rel(file)} → ${rel(e.target)}`),
    );
    expect(up.sort()).toEqual(TYPE_IMPORTS_UP);
  });
});

/**
 * The rooms of src/ from the top (the front doors) to the ground (helpers that import nothing of
 * ours): the data flow of the README, front doors → producers → queue → workers → sinks, read as
 * who may import whom. A room imports rooms of its own layer or below.
 */
const LAYERS: readonly (readonly string[])[] = [
  ['cli.ts', 'index.ts', 'server.ts', 'commands/'],
  ['console/', 'api/'],
  ['http/'],
  ['workers/'],
  ['watch/'],
  ['producers/', 'retention.ts'],
  ['presenters/'],
  ['metrics.ts'],
  ['sinks/'],
  ['plans/'],
  ['services.ts'],
  ['config.ts'],
  ['webhooks/'],
  ['queue/'],
  ['schemas/'],
  ['accounts/'],
  ['upstream/'],
  ['redis/', 'engine/'],
  ['simulator/'],
  [
    'money.ts',
    'errors.ts',
    'plates.ts',
    'setting-values.ts',
    'settle.ts',
    'logger.ts',
    'error-codes.ts',
    'time-text.ts',
    'words.ts',
    'telemetry/',
    'clock.ts',
    'excel.ts',
  ],
];

/**
 * Imports back up, every one of them a type alone (no trace in the build): the Config that is
 * parsed once at the top and handed down, and the reasons a line waits (named once, in accounts/).
 */
const TYPE_IMPORTS_UP = [
  'type queue/account-queues.ts → config.ts',
  'type queue/accounts.ts → config.ts',
  'type queue/poll-schedule.ts → config.ts',
  'type redis/connection.ts → config.ts',
  'type redis/health.ts → accounts/wait.ts',
  'type redis/layout.ts → config.ts',
  'type webhooks/outbox.ts → config.ts',
];

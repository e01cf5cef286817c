// One owner per Redis structure, and Lua in files: the checks issue 11 asks anyone to be able to
// run with grep, run here on every test run. A key name (VqbKeys method) may appear only in its
// owner module; a Lua script only in src/redis/lua/, each with a header naming its KEYS and ARGV.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = join(import.meta.dirname, '../..');

function sources(dir: string): string[] {
  return readdirSync(join(ROOT, dir)).flatMap((name) => {
    const path = join(dir, name);
    return statSync(join(ROOT, path)).isDirectory() ? sources(path) : name.endsWith('.ts') ? [path] : [];
  });
}

// The worker processes' code (top-level workers/) is held to the same rules as src/.
const CODE = [...sources('src'), ...sources('workers')];

/** Key-name methods of VqbKeys → the module (file or folder) that alone may name them. */
const OWNERS: Record<string, string> = {
  batches: 'src/queue/batch/',
  batch: 'src/queue/batch/',
  outcomes: 'src/queue/batch/',
  rows: 'src/queue/batch/',
  ingestLock: 'src/queue/batch/',
  ingestUnlocked: 'src/queue/batch/',
  batchFinished: 'src/queue/batch/',
  batchContent: 'src/queue/batch/',
  plateTraces: 'src/queue/plate-traces.ts',
  account: 'src/queue/line.ts',
  pace: 'src/queue/line.ts',
  paceHold: 'src/queue/line.ts',
  answers: 'src/queue/answers.ts',
  upstreamAnswers: 'src/queue/answers.ts',
  inflight: 'src/queue/inflight.ts',
  inflightByBatch: 'src/queue/inflight.ts',
  schedClass: 'src/queue/scheduler.ts',
  schedWeights: 'src/queue/scheduler.ts',
  schedDeadlines: 'src/queue/scheduler.ts',
  pendingPrefix: 'src/queue/scheduler.ts',
  pendingTemplate: 'src/queue/scheduler.ts',
  pending: 'src/queue/scheduler.ts',
  staged: 'src/queue/scheduler.ts',
  schedActive: 'src/queue/scheduler.ts',
  schedDeadlineAccounts: 'src/queue/scheduler.ts',
  spendDay: 'src/queue/budget.ts',
  spendMonth: 'src/queue/budget.ts',
  budget: 'src/queue/budget.ts',
  batchBudget: 'src/queue/budget.ts',
  costDay: 'src/queue/costs.ts',
  batchCosts: 'src/queue/costs.ts',
  batchSeries: 'src/queue/series.ts',
  accountSeries: 'src/queue/series.ts',
  learner: 'src/queue/poll-schedule.ts',
  learnerStated: 'src/queue/poll-schedule.ts',
  reuse: 'src/queue/reuse.ts',
  accountReuse: 'src/queue/reuse.ts',
  reuseDay: 'src/queue/reuse.ts',
  accountReuseDay: 'src/queue/reuse.ts',
  inbox: 'src/producers/inbox-',
  consoleSession: 'src/console/sessions.ts',
  consoleUpload: 'src/console/uploads.ts',
  consoleUploads: 'src/console/uploads.ts',
  consoleSignInFailures: 'src/console/throttle.ts',
  consoleFailed: 'src/console/failed-plates.ts',
  batchWebhooks: 'src/webhooks/',
  batchWebhooksChanged: 'src/webhooks/',
  retentionLock: 'src/retention.ts',
  workers: 'src/queue/presence.ts',
  batchAccounts: 'src/queue/batch/',
  accountBatches: 'src/queue/batch/',
  batchListsIndexed: 'src/queue/batch/',
  apiRateLimit: 'src/api/',
  schedActiveFlag: 'src/queue/scheduler.ts',
  legacyCostDay: 'src/queue/costs.ts',
  layout: 'src/redis/layout.ts',
  layoutUnlocked: 'src/redis/layout.ts',
  watch: 'src/watch/store.ts',
  watchPlates: 'src/watch/store.ts',
  watchRemoved: 'src/watch/store.ts',
  watchLast: 'src/watch/store.ts',
  watchHistory: 'src/watch/store.ts',
  watchRounds: 'src/watch/store.ts',
  watchChanges: 'src/watch/store.ts',
  watchClose: 'src/watch/store.ts',
  accountWatches: 'src/watch/store.ts',
  watches: 'src/watch/store.ts',
  wake: 'src/queue/feeder.ts',
  holds: 'src/queue/hold-news.ts',
  // Not structures: the account slot's names, built in keys.ts only (tests and the bench read them).
  accountBase: 'src/redis/keys.ts',
  accountTag: 'src/redis/keys.ts',
};

/** Moves data of the single-slot layout to the current one (issue 21): it names every structure, once. */
const MIGRATION = 'src/redis/layout.ts';

describe('one owner per Redis structure', () => {
  it('every key name is used only by its owner module', () => {
    const strays: string[] = [];
    for (const file of CODE) {
      const text = readFileSync(join(ROOT, file), 'utf8');
      for (const match of text.matchAll(/\bkeys\.([A-Za-z]+)\b/g)) {
        const owner = OWNERS[match[1]!];
        if (owner !== undefined && !file.startsWith(owner) && file !== MIGRATION)
          strays.push(`${file}: keys.${match[1]}`);
      }
      // A key built by hand from the base would dodge the check.
      if (/keys\.base\b/.test(text) && file !== 'src/redis/keys.ts') strays.push(`${file}: keys.base`);
    }
    expect(strays).toEqual([]);
  });

  it('every VqbKeys method has an owner listed here', () => {
    const keys = readFileSync(join(ROOT, 'src/redis/keys.ts'), 'utf8');
    const methods = [...keys.matchAll(/^ {2}(?:get )?([a-zA-Z]+)\(/gm)]
      .map((m) => m[1]!)
      .filter((m) => m !== 'constructor');
    expect(methods.filter((m) => OWNERS[m] === undefined)).toEqual([]);
  });
});

describe('Lua scripts live in files with a KEYS/ARGV header', () => {
  const dir = 'src/redis/lua';
  const scripts = readdirSync(join(ROOT, dir)).filter((f) => f.endsWith('.lua'));

  it('no TypeScript module defines or evaluates Lua inline', () => {
    const inline = CODE.filter((file) =>
      /defineCommand\(|\.eval\(|\.evalsha\(|redis\.call\(/.test(readFileSync(join(ROOT, file), 'utf8')),
    );
    expect(inline.map((f) => relative(ROOT, join(ROOT, f)))).toEqual(['src/redis/scripts.ts']);
  });

  it.each(scripts)(
    '%s: named <name>-<keys>.lua, a header naming each KEYS[i] it uses and its ARGV, and no KEYS beyond its count',
    (file) => {
      const text = readFileSync(join(ROOT, dir, file), 'utf8');
      const count = Number(/-(\d+)\.lua$/.exec(file)?.[1]);
      const header = /^--\[\[([\s\S]*?)\]\]/.exec(text)?.[1] ?? '';
      const body = text.slice(text.indexOf(']]') + 2);
      const used = new Set([...body.matchAll(/KEYS\[(\d+)\]/g)].map((m) => Number(m[1])));
      expect(header, 'a --[[ ]] header first').not.toBe('');
      for (const i of used) {
        expect(i, `KEYS[${i}] within the declared ${count}`).toBeLessThanOrEqual(count);
      }
      // The header names the keys (KEYS[1], or KEYS[1..3]) and says what ARGV holds, when it takes any.
      for (let i = 1; i <= count; i++) expect(header).toMatch(new RegExp(`KEYS\\[(${i}|\\d\\.\\.\\d)\\]`));
      if (/ARGV\[/.test(body)) expect(header).toMatch(/ARGV\[/);
    },
  );

  it('a rule shared by scripts lives once in includes/, and every include is used', () => {
    const includes = readdirSync(join(ROOT, dir, 'includes')).map((f) => f.replace(/\.lua$/, ''));
    const used = new Set(
      scripts.flatMap((file) =>
        [...readFileSync(join(ROOT, dir, file), 'utf8').matchAll(/^--- @include "([a-z-]+)"$/gm)].map((m) => m[1]!),
      ),
    );
    expect([...used].filter((name) => !includes.includes(name))).toEqual([]);
    expect(includes.filter((name) => !used.has(name))).toEqual([]);
  });
});

describe('each part of the queue is built once, in services.ts', () => {
  it('a class services.ts constructs is constructed nowhere else in src/ or workers/', () => {
    const built = (file: string) =>
      [...readFileSync(join(ROOT, file), 'utf8').matchAll(/\bnew ([A-Z]\w+)\(/g)].map((m) => m[1]!);
    // VqbKeys names keys from the config alone (no state, no connection): any module may make one.
    const parts = new Set(built('src/services.ts').filter((name) => name !== 'VqbKeys'));
    // The stores and learners a reader would expect to find there (issue 45: PollLearner was built
    // in four places, ReuseStore in two).
    for (const part of ['BatchStore', 'OutcomeStore', 'PollLearner', 'ReuseStore', 'AnswerBook', 'CostLedger'])
      expect(parts.has(part), part).toBe(true);
    const elsewhere = CODE.filter((file) => file !== 'src/services.ts').flatMap((file) =>
      built(file)
        .filter((name) => parts.has(name))
        .map((name) => `${file}: new ${name}(`),
    );
    expect(elsewhere).toEqual([]);
  });
});

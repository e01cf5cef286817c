// The drop folder as an operator uses it: real files in a temporary VQ_ROOT, real Redis, the
// simulator over HTTP and an in-process worker. Scans are driven by hand (scanOnce) except where
// the polling loop itself is under test.
import { createHash, randomBytes } from 'node:crypto';
import { appendFile, lstat, mkdir, mkdtemp, readdir, readFile, rename, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createInboxWatcher, type InboxWatcher, isForceName } from '../../src/producers/inbox.js';
import { pathIn } from '../../src/producers/inbox-files.js';
import { batchIdFor } from '../../src/producers/ingest.js';
import type { IngestRow } from '../../src/queue/batch/store.js';
import { type Harness, type HarnessOptions, sleep, useHarness } from '../helpers/engine.js';

const STABLE_MS = 200;

const harness = useHarness();
let base: string | undefined;
const watchers: InboxWatcher[] = [];

// Runs before the harness closes (vitest runs later hooks first).
afterEach(async () => {
  await Promise.all(watchers.splice(0).map((w) => w.stop()));
  if (base) await rm(base, { recursive: true, force: true });
  base = undefined;
});

async function setup(label: string, sim: HarnessOptions = {}) {
  base = await mkdtemp(join(tmpdir(), 'vqb-inbox-'));
  const root = join(base, 'root');
  const h = await harness.start({
    label,
    ...sim,
    config: { VQ_ROOT: root, VQ_INBOX_STABLE: `${STABLE_MS}ms`, VQ_INBOX_POLL: '100ms' },
  });
  const newWatcher = () => {
    const w = createInboxWatcher({ services: h.services, config: h.config, logger: h.logs.logger });
    watchers.push(w);
    return w;
  };
  const dir = (sub: string) => join(root, sub);
  const ls = async (sub: string) => (await readdir(dir(sub)).catch(() => [] as string[])).sort();
  return { h, base, root, dir, ls, watcher: newWatcher(), newWatcher };
}

function csv(plates: string[]): string {
  return `placa;cliente\r\n${plates.map((p, i) => `${p};cliente ${i + 1}`).join('\r\n')}\r\n`;
}

function plates(prefix: string, n: number): string[] {
  return Array.from({ length: n }, (_, i) => `${prefix}${String(i).padStart(4, '0')}`);
}

function idFor(name: string, content: string | Buffer): string {
  return batchIdFor(name, createHash('sha256').update(content).digest('hex'));
}

/** Scans until `check` holds (scanning is how exports get written). */
async function until(w: InboxWatcher, check: () => Promise<boolean>, what: string, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    await w.scanOnce();
    if (await check()) return;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

function exportLines(text: string): string[][] {
  expect(text.charCodeAt(0)).toBe(0xfeff);
  return text
    .slice(1)
    .trimEnd()
    .split('\r\n')
    .map((l) => l.split(';'));
}

/** Waits until no plate job is waiting, delayed or running: whatever was queued has been sent upstream. */
async function queueIdle(h: Harness, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await h.idle()) return;
    if (Date.now() > deadline) throw new Error('the queue is not idle');
    await sleep(100);
  }
}

function logsMatching(harness: Harness, pattern: RegExp): Record<string, unknown>[] {
  return harness.logs.lines.filter((l) => pattern.test(String(l.msg)));
}

describe('inbox drop folder', () => {
  it('waits for a file being written, ingests it, archives it and exports the batch to outbox/ when it finishes', async () => {
    const { h, dir, ls, watcher } = await setup('inbox-ok', { sim: { failPlates: ['FAI1L00'] } });
    const list = [...plates('OKA', 4), 'FAI1L00', 'NOPE', 'OKA0001'];
    const content = csv(list);
    const half = content.slice(0, 40);
    await watcher.scanOnce(); // creates the folders
    await writeFile(join(dir('inbox'), 'frota.csv'), half);
    await watcher.scanOnce();
    expect(await ls('inbox')).toEqual(['frota.csv']);
    await sleep(STABLE_MS + 50);
    await appendFile(join(dir('inbox'), 'frota.csv'), content.slice(40));
    await watcher.scanOnce(); // changed since the last scan: still not taken
    expect(await ls('inbox')).toEqual(['frota.csv']);
    expect(await ls('processing')).toEqual([]);
    expect((await h.services.batchViews.list()).total).toBe(0);

    await sleep(STABLE_MS + 50);
    await watcher.scanOnce();
    expect(await ls('inbox')).toEqual([]);
    expect(await ls('processing')).toEqual([]);
    const archived = await ls('archive');
    expect(archived).toHaveLength(1);
    expect(archived[0]).toMatch(/^\d{8}-\d{6}-frota\.csv$/);
    expect(await readFile(join(dir('archive'), archived[0]!), 'utf8')).toBe(content);

    const batchId = idFor('frota.csv', content);
    const info = await h.services.batchViews.get(batchId);
    expect(info).toMatchObject({ source: 'inbox', name: 'frota.csv', sealed: true });
    expect(info.counts).toMatchObject({ total: 7, enqueued: 5, rejected: 1, duplicates: 1 });

    await until(watcher, async () => (await ls('outbox')).includes(`${batchId}.csv`), 'the export');
    expect(await ls('outbox')).toEqual([
      `${batchId}.csv`,
      `${batchId}.jsonl`,
      `${batchId}.rejects.csv`,
      `${batchId}.xlsx`,
    ]);
    const lines = exportLines(await readFile(join(dir('outbox'), `${batchId}.csv`), 'utf8'));
    expect(lines).toHaveLength(list.length + 1);
    expect(lines[0]!.slice(0, 4)).toEqual(['row', 'input', 'plate', 'status']);
    expect(lines[0]).toContain('cliente');
    expect(lines.slice(1).map((l) => l[3])).toEqual([
      'done',
      'done',
      'done',
      'done',
      'failed',
      'rejected',
      'duplicate',
    ]);
    expect(h.sim.stats().creates).toBe(5);

    for (const step of ['taken', 'ingested', 'archived', 'exported']) {
      const found = logsMatching(h, new RegExp(`^inbox: ${step} `));
      expect(found, step).toHaveLength(1);
      if (step !== 'taken') expect(found[0]!.batchId).toBe(batchId);
    }
    // Exported once: further scans write nothing again.
    await watcher.scanOnce();
    expect(logsMatching(h, /^inbox: exported /)).toHaveLength(1);
  });

  it('never takes a .part file or a dotfile; takes the renamed file at once', async () => {
    const { h, dir, ls, watcher } = await setup('inbox-part', { workers: 0 });
    await watcher.scanOnce(); // creates the folders
    const content = csv(plates('PRT', 3));
    await writeFile(join(dir('inbox'), 'lote.csv.part'), content);
    await writeFile(join(dir('inbox'), '.lote.csv'), content);
    await watcher.scanOnce();
    await sleep(STABLE_MS + 50);
    await watcher.scanOnce();
    await watcher.scanOnce();
    expect(await ls('inbox')).toEqual(['.lote.csv', 'lote.csv.part']);
    expect((await h.services.batchViews.list()).total).toBe(0);

    await rename(join(dir('inbox'), 'lote.csv.part'), join(dir('inbox'), 'lote.csv'));
    await watcher.scanOnce(); // no stability wait: the rename says the file is complete
    expect(await ls('inbox')).toEqual(['.lote.csv']);
    expect(await h.services.batches.exists(idFor('lote.csv', content))).toBe(true);
  });

  it('moves garbage to failed/ with an .error.txt saying why, pays nothing, and goes on with the next file', async () => {
    const { h, dir, ls, watcher } = await setup('inbox-bad');
    await watcher.scanOnce();
    const inbox = dir('inbox');
    await writeFile(join(inbox, 'random.csv'), randomBytes(4096));
    await writeFile(
      join(inbox, 'planilha.csv'),
      Buffer.concat([Buffer.from([0x50, 0x4b, 0x03, 0x04]), randomBytes(500)]),
    );
    // Valid for the first ~100 KiB, NUL bytes after: found only by reading to the end.
    await writeFile(join(inbox, 'nul.csv'), Buffer.concat([Buffer.from(csv(plates('NUL', 9000))), Buffer.alloc(16)]));
    await writeFile(join(inbox, 'notes.xlsx'), 'placa\nABC1234\n');
    await writeFile(join(inbox, 'vazio.csv'), '\r\n;;\r\n\r\n');
    const good = csv(plates('GOD', 2));
    await writeFile(join(inbox, 'good.csv'), good);
    await watcher.scanOnce();
    await sleep(STABLE_MS + 50);
    await watcher.scanOnce();

    expect(await ls('inbox')).toEqual([]);
    expect(await ls('processing')).toEqual([]);
    const expected: Record<string, RegExp> = {
      'random.csv': /\[CSV_BINARY\]/,
      'planilha.csv': /\.xlsx workbook.*\[XLSX_INVALID\].*CSV UTF-8/, // zip bytes: read as a workbook, whatever the name
      'nul.csv': /NUL byte.*\[CSV_BINARY\]/,
      'notes.xlsx': /not a zip archive.*\[XLSX_INVALID\]/,
      'vazio.csv': /only blank lines \[CSV_EMPTY\]/,
    };
    expect(await ls('failed')).toEqual(
      Object.keys(expected)
        .flatMap((n) => [n, `${n}.error.txt`])
        .sort(),
    );
    for (const [name, pattern] of Object.entries(expected)) {
      const report = await readFile(join(dir('failed'), `${name}.error.txt`), 'utf8');
      expect(report, name).toMatch(pattern);
      expect(report).toContain(`"${name}"`);
    }
    expect(logsMatching(h, /^inbox: failed /)).toHaveLength(5);
    expect(await ls('archive')).toHaveLength(1);
    // Only the good file became a batch: the NUL file queued nothing before its bad bytes were found.
    await h.waitForBatch(idFor('good.csv', good));
    await queueIdle(h);
    const { batches } = await h.services.batchViews.list();
    expect(batches.map((b) => b.id)).toEqual([idFor('good.csv', good)]);
    expect(h.sim.stats().creates).toBe(2);
  });

  it('the same file again pays nothing and is exported again; a force- or .force. name is a new batch', async () => {
    const { h, dir, ls, watcher } = await setup('inbox-again');
    await watcher.scanOnce();
    const content = csv(plates('AGN', 3));
    const batchId = idFor('frota.csv', content);
    const drop = async (name: string) => {
      await writeFile(join(dir('inbox'), name), content);
      await watcher.scanOnce();
      await sleep(STABLE_MS + 50);
      await watcher.scanOnce();
      expect(await ls('inbox')).toEqual([]);
    };
    await drop('frota.csv');
    await until(watcher, async () => (await ls('outbox')).includes(`${batchId}.csv`), 'the first export');
    expect(h.sim.stats().creates).toBe(3);
    await rm(join(dir('outbox'), `${batchId}.csv`));

    await drop('frota.csv');
    expect(await ls('archive')).toHaveLength(2);
    expect(await ls('outbox')).toContain(`${batchId}.csv`); // the batch was finished: exported in the same scan
    expect((await h.services.batchViews.list()).total).toBe(1);
    await queueIdle(h);
    expect(h.sim.stats().creates).toBe(3);

    expect(isForceName('force-frota.csv') && isForceName('frota.FORCE.csv') && !isForceName('forcefrota.csv')).toBe(
      true,
    );
    await drop('force-frota.csv');
    await drop('force-frota.csv');
    await drop('frota.force.csv');
    const ids = logsMatching(h, /^inbox: ingested /).map((l) => String(l.batchId));
    expect(ids).toHaveLength(4);
    expect(new Set(ids).size).toBe(4);
    expect(await ls('archive')).toHaveLength(5);
    await until(
      watcher,
      async () => (await ls('outbox')).filter((f) => f.endsWith('.jsonl')).length === 4,
      'the forced exports',
    );
    expect(h.sim.stats().creates).toBe(12);
  });

  it('resumes a file left in processing/ by a crash mid-ingest: the batch completes with no duplicate jobs or creates', async () => {
    const { h, dir, ls, watcher, newWatcher } = await setup('inbox-crash');
    await watcher.scanOnce();
    const list = plates('CRS', 30);
    const content = csv(list);
    const name = 'retomada.csv';
    const batchId = idFor(name, content);
    // What a watcher that died after queuing its first chunk left: 10 rows stored, not sealed.
    await h.services.batches.open({
      id: batchId,
      account: 'default',
      priority: 'normal',
      weight: 1,
      source: 'inbox',
      name,
      product: h.config.product,
      extraColumns: ['cliente'],
    });
    const opened = await h.services.batchViews.get(batchId);
    const first: IngestRow[] = list
      .slice(0, 10)
      .map((plate, i) => ({ row: i + 1, input: plate, extra: [`cliente ${i + 1}`], kind: 'queued', plate }));
    await h.services.batches.addRows(opened, first, h.services.scheduler);
    await writeFile(join(dir('processing'), name), content);
    await sleep(300); // the first jobs get created meanwhile

    await watcher.stop();
    const again = newWatcher(); // the restarted process
    await again.scanOnce();
    expect(await ls('processing')).toEqual([]);
    expect(await ls('archive')).toHaveLength(1);
    await until(again, async () => (await ls('outbox')).includes(`${batchId}.csv`), 'the export');
    const info = await h.services.batchViews.get(batchId);
    expect(info.counts).toMatchObject({ total: 30, enqueued: 30, done: 30, failed: 0, duplicates: 0 });
    const stats = h.sim.stats({ plates: true });
    expect(stats.creates).toBe(30);
    expect(Object.values(stats.createsByPlate ?? {}).every((n) => n === 1)).toBe(true);
    const lines = exportLines(await readFile(join(dir('outbox'), `${batchId}.csv`), 'utf8'));
    expect(lines.slice(1).map((l) => l[1])).toEqual(list);
    expect(lines.slice(1).every((l) => l[3] === 'done')).toBe(true);
  });

  it('odd names work and stay inside the root; links are not followed (logged once)', async () => {
    const { h, base, root, dir, ls, watcher } = await setup('inbox-paths');
    await watcher.scanOnce();
    const inbox = dir('inbox');
    const outside = join(base, 'outside');
    await mkdir(outside);
    const secret = csv(plates('SEC', 2));
    await writeFile(join(outside, 'secret.csv'), secret);
    await symlink(join(outside, 'secret.csv'), join(inbox, 'link.csv'));
    await symlink(outside, join(inbox, 'dir-link.csv'));
    await mkdir(join(inbox, 'pasta.csv'));

    const long = `placas-${'ç'.repeat(118)}.csv`; // 247 bytes: too long once archived with its time prefix
    const files: Record<string, string> = {
      'frota São Paulo.csv': csv(plates('SAO', 2)),
      'a..b.csv': csv(plates('ABB', 2)),
      [long]: csv(plates('LNG', 2)),
      'Case.TXT': csv(plates('CSA', 2)),
      'case.txt': csv(plates('CSB', 2)),
    };
    for (const [name, content] of Object.entries(files)) await writeFile(join(inbox, name), content);
    expect(() =>
      pathIn(
        {
          root,
          dirs: {
            inbox,
            processing: dir('processing'),
            archive: dir('archive'),
            failed: dir('failed'),
            outbox: dir('outbox'),
          },
        },
        'inbox',
        '../x.csv',
      ),
    ).toThrow(/refusing/);

    watcher.start();
    const ids = Object.entries(files).map(([name, content]) => idFor(name, content));
    const deadline = Date.now() + 20_000;
    // Four exports a batch (CSV, JSONL, rejects, XLSX): waiting for three let a loaded machine read
    // the folder before the last one was written.
    const done = async () => (await ls('outbox')).length >= ids.length * 4 && watcher.status().exported >= ids.length;
    while (!(await done()) && Date.now() < deadline) await sleep(100);
    await watcher.stop();
    expect(watcher.status()).toMatchObject({
      running: false,
      scanning: false,
      taken: 5,
      failed: 0,
      exported: 5,
      pendingExports: 0,
      waiting: 0,
    });
    expect(await ls('outbox')).toEqual(
      ids.flatMap((id) => [`${id}.csv`, `${id}.jsonl`, `${id}.rejects.csv`, `${id}.xlsx`]).sort(),
    );

    expect(await ls('inbox')).toEqual(['dir-link.csv', 'link.csv', 'pasta.csv']);
    expect((await lstat(join(inbox, 'link.csv'))).isSymbolicLink()).toBe(true);
    expect(await readFile(join(outside, 'secret.csv'), 'utf8')).toBe(secret);
    for (const name of ['link.csv', 'dir-link.csv', 'pasta.csv']) {
      expect(
        h.logs.lines.filter((l) => l.file === name && /^inbox: skipped/.test(String(l.msg))),
        name,
      ).toHaveLength(1);
    }
    const archived = await ls('archive');
    expect(archived).toHaveLength(5);
    for (const name of archived) {
      expect(name).toMatch(/^\d{8}-\d{6}-/);
      expect(Buffer.byteLength(name)).toBeLessThanOrEqual(255);
    }
    expect(archived.some((n) => n.endsWith('-frota São Paulo.csv'))).toBe(true);
    expect(archived.some((n) => n.endsWith('-a..b.csv'))).toBe(true);
    expect(archived.some((n) => n.startsWith(`${n.slice(0, 16)}placas-ççç`) && n.endsWith('ç.csv'))).toBe(true);
    expect(h.sim.stats().creates).toBe(10); // 2 plates × 5 files; the linked file's plates never queried

    // Nothing was written outside the root: the temp dir holds the root and the untouched outside file.
    const walk = async (d: string): Promise<string[]> => {
      const entries = await readdir(d, { withFileTypes: true });
      const nested = await Promise.all(
        entries.map((e) => (e.isDirectory() ? walk(join(d, e.name)) : [join(d, e.name)])),
      );
      return nested.flat();
    };
    const everything = (await walk(base)).map((p) => relative(base, p));
    expect(everything.filter((p) => !p.startsWith(`root/`))).toEqual([join('outside', 'secret.csv')]);
  });
});

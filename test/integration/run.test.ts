// `vqb run` and `vqb export` as a user runs them (real Redis, the simulator over HTTP): in this
// process (runVqb), or spawned where the test is about the process (its signals, its output while it runs).
import { readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { type Harness, sleep, useHarness } from '../helpers/engine.js';
import { harnessEnv, runVqb, spawnVqb, startVqb } from '../helpers/process.js';
import { sheetValues } from '../helpers/xlsx.js';

const harness = useHarness();

/** `vqb <args>` in this process, with the harness's settings (and `env`). */
function vqb(h: Harness, args: string[], env: Record<string, string> = {}) {
  return runVqb(args, harnessEnv(h, env));
}

/** `vqb <args>` as a child process, for a test that kills it, signals it or reads it while it runs. */
function vqbProcess(h: Harness, args: string[], env: Record<string, string> = {}) {
  return spawnVqb(args, harnessEnv(h, env));
}

function csvFile(rows: string[]): string {
  return `placa;cliente;obs\r\n${rows.join('\r\n')}\r\n`;
}

describe('vqb run', () => {
  it('runs a CSV to the end: one export row per input row, formulas escaped, rebuilt exports byte-identical', async () => {
    const h = await harness.start({ label: 'run', workers: 0, sim: { failPlates: ['FAI1L00'] } });
    const file = join(h.config.outDir, '..', 'frota.csv');
    const rows = [
      'ABC1234;Ação Ltda;ok',
      'abc-1234;Ação Ltda;dup',
      'XYZ9Z99;=cmd|calc;formula',
      'NOPE;x;bad',
      'FAI1L00;y;fails',
      'ABC1C34;z;same vehicle',
      ';;empty',
    ];
    await writeFile(file, csvFile(rows));
    const { code, stdout, stderr } = await vqb(h, ['run', file]);
    expect(stderr).toBe('');
    expect(code).toBe(0);
    const batchId = /batch (frota-[0-9a-f]{12})/.exec(stdout)?.[1];
    expect(batchId).toBeDefined();

    const csvPath = join(h.config.outDir, `${batchId}.csv`);
    const csv = await readFile(csvPath, 'utf8');
    expect(csv.charCodeAt(0)).toBe(0xfeff);
    const lines = csv.slice(1).trimEnd().split('\r\n');
    expect(lines).toHaveLength(rows.length + 1);
    const header = lines[0]!.split(';');
    expect(header.slice(0, 4)).toEqual(['row', 'input', 'plate', 'status']);
    expect(header).toContain('cliente');
    const status = (row: number) => lines[row]!.split(';')[3];
    expect([1, 2, 3, 4, 5, 6, 7].map(status)).toEqual([
      'done',
      'duplicate',
      'done',
      'rejected',
      'failed',
      'done',
      'rejected',
    ]);
    expect(lines[6]).toContain('ABC1234'); // same vehicle as row 1, flagged
    expect(csv).toContain("'=cmd|calc");
    expect(csv).not.toMatch(/;=cmd/);
    expect(csv).toContain('Ação Ltda');

    const info = await h.services.batchViews.get(batchId!);
    expect(info.counts).toMatchObject({ total: 7, enqueued: 4, done: 3, failed: 1, rejected: 2, duplicates: 1 });
    const rejects = await readFile(join(h.config.outDir, `${batchId}.rejects.csv`), 'utf8');
    expect(rejects).toContain('NOPE');

    const jsonl = await readFile(join(h.config.outDir, `${batchId}.jsonl`), 'utf8');
    expect(jsonl.trimEnd().split('\n')).toHaveLength(rows.length);
    const rebuilt = await vqb(h, ['export', batchId!]);
    expect(rebuilt.code).toBe(0);
    expect(await readFile(csvPath, 'utf8')).toBe(csv);
    expect(await readFile(join(h.config.outDir, `${batchId}.jsonl`), 'utf8')).toBe(jsonl);

    // Running the same file again resumes the same (finished) batch: nothing is paid twice.
    const again = await vqb(h, ['run', file]);
    expect(again.code).toBe(0);
    expect(again.stdout).toContain(`resuming batch ${batchId}`);
    expect(h.sim.stats().creates).toBe(4);
  }, 60_000);

  it('every batch ends as CSV, JSONL and XLSX: `vqb run` on a CSV and `vqb export --format all` write the workbook', async () => {
    const h = await harness.start({ label: 'run-xlsx', workers: 0 });
    const file = join(h.config.outDir, '..', 'frota.csv');
    await writeFile(file, csvFile(['ABC1234;Ação Ltda;ok', 'NOPE;x;bad']));
    const run = await vqb(h, ['run', file]);
    expect(run.code).toBe(0);
    const batchId = /batch (frota-[0-9a-f]{12})/.exec(run.stdout)?.[1];
    const xlsxPath = join(h.config.outDir, `${batchId}.xlsx`);
    expect(run.stdout).toContain(xlsxPath);
    const results = await sheetValues(await readFile(xlsxPath));
    expect(results[0]!.slice(0, 4)).toEqual(['row', 'input', 'plate', 'status']);
    expect(results.slice(1).map((r) => r[3])).toEqual(['done', 'rejected']);
    expect((await sheetValues(await readFile(xlsxPath), 'rejects')).map((r) => r[1])).toEqual(['input', 'NOPE']);

    await rm(h.config.outDir, { recursive: true, force: true });
    const exported = await vqb(h, ['export', batchId!, '--format', 'all']);
    expect(exported.code).toBe(0);
    expect(exported.stdout.trimEnd().split('\n').sort()).toEqual(
      ['csv', 'jsonl', 'rejects.csv', 'xlsx'].map((ext) => join(h.config.outDir, `${batchId}.${ext}`)).sort(),
    );
    expect(await sheetValues(await readFile(xlsxPath))).toEqual(results);
    const bad = await vqb(h, ['export', batchId!, '--format', 'pdf']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--format is csv, jsonl, xlsx or all');
  }, 60_000);

  it('a killed `vqb run` resumes the same batch when run again, with no extra creates', async () => {
    const h = await harness.start({ label: 'rerun', workers: 0, sim: { completionMs: [300, 800] } });
    const file = join(h.config.outDir, '..', 'big.csv');
    const plates = Array.from({ length: 300 }, (_, i) => `KIL${String(i).padStart(4, '0')};c${i};`);
    await writeFile(file, csvFile(plates));
    const first = vqbProcess(h, ['run', file]);
    for (let i = 0; i < 200 && h.sim.stats().creates < 80; i++) await sleep(50);
    first.child.kill('SIGKILL');
    await first.done;
    const afterKill = h.sim.stats().creates;
    expect(afterKill).toBeGreaterThan(0);
    expect(afterKill).toBeLessThan(300);

    const second = await vqb(h, ['run', file]);
    expect(second.code).toBe(0);
    expect(second.stdout).toMatch(/resuming batch big-[0-9a-f]{12}/);
    const stats = h.sim.stats({ plates: true });
    const batchId = /resuming batch (\S+):/.exec(second.stdout)![1]!;
    const info = await h.services.batchViews.get(batchId);
    expect(info.counts).toMatchObject({ enqueued: 300, done: 300 });
    // Only a create cut off in flight by the kill may repeat, and its outcome says so. The flag
    // means "possible": a process killed after marking the create but before sending it is flagged
    // too, so flagged plates are a superset of the plates really created twice.
    const twice = Object.entries(stats.createsByPlate ?? {})
      .filter(([, n]) => n > 1)
      .map(([p]) => p);
    for (const plate of twice)
      expect(
        (await h.services.outcomes.get(await h.services.batches.ref(batchId), plate))?.possibleDuplicate,
        plate,
      ).toBe(true);
    expect(stats.creates - 300).toBeLessThanOrEqual(info.counts.possibleDuplicates);
  }, 90_000);

  it('Ctrl-C stops gracefully with exit 130 and a resume hint; an expired key exits 3 with the reason', async () => {
    const h = await harness.start({ label: 'stop', workers: 0, sim: { completionMs: [300, 800] } });
    const file = join(h.config.outDir, '..', 'stop.csv');
    await writeFile(file, csvFile(Array.from({ length: 200 }, (_, i) => `STP${String(i).padStart(4, '0')};;`)));
    // In this process: the stop as SIGINT hands it to `main` (io.stopSignal); the signal itself, from
    // the OS to a process, is cli-stops-and-words' (a second Ctrl-C) and worker-crash's.
    const run = startVqb(['run', file], harnessEnv(h));
    for (let i = 0; i < 200 && h.sim.stats().creates < 20; i++) await sleep(50);
    const stopped = await run.stop('SIGINT');
    expect(stopped.code).toBe(130);
    expect(stopped.stdout).toContain('run the same command again to resume');

    h.sim.keys.expire('test-key-0123456789abcdef');
    const blocked = await vqb(h, ['run', file]);
    expect(blocked.code).toBe(3);
    expect(blocked.stderr).toMatch(/cannot go on: .*expired/i);
    expect(blocked.stderr).not.toContain('test-key-0123456789abcdef');
  }, 60_000);

  it("waits under an operator's `vqb pause`, says so once, and finishes after `vqb resume`", async () => {
    const h = await harness.start({ label: 'held', workers: 0 });
    const file = join(h.config.outDir, '..', 'held.csv');
    await writeFile(file, csvFile(['HLD0001;a;', 'HLD0002;b;', 'HLD0003;c;']));
    expect((await vqb(h, ['pause'])).code).toBe(0);

    // In this process (main(argv, io)): what it prints is read while it runs.
    const run = startVqb(['run', file], harnessEnv(h));
    let ended = false;
    void run.done.then(() => (ended = true));
    const out = () => run.output().stdout;
    for (let i = 0; i < 400 && !out().includes('vqb resume'); i++) await sleep(50);
    expect(out()).toMatch(/account default is paused by an operator \(vqb pause\): waiting for `vqb resume`/);
    // It waits: the pause stands, nothing is created, the run goes on.
    await sleep(1_500);
    expect((await h.line.state()).pause?.code).toBe('PAUSED_BY_OPERATOR');
    expect(h.sim.stats().creates).toBe(0);
    expect(ended).toBe(false);

    expect((await vqb(h, ['resume'])).code).toBe(0);
    const { code, stdout, stderr } = await run.done;
    expect(stderr).toBe('');
    expect(code).toBe(0);
    expect(stdout.match(/waiting for `vqb resume`/g)).toHaveLength(1);
    expect(stdout).not.toMatch(/resuming\b.*paused|cannot go on/);
    expect(stdout).toMatch(/exports:/);
    expect(h.sim.stats().creates).toBe(3);
  }, 60_000);

  it('a config error prints one readable line and exits 2, with no stack trace', async () => {
    const h = await harness.start({ label: 'cfg', workers: 0 });
    const { code, stdout, stderr } = await vqb(h, ['run', 'x.csv'], { VQ_RATE_LIMIT: 'fast' });
    expect(code).toBe(2);
    expect(stdout).toBe('');
    expect(stderr.trim().split('\n')).toHaveLength(1);
    expect(stderr).toMatch(/^vqb: VQ_RATE_LIMIT: expected/);
  });

  it('the operator commands answer in JSON for scripts: status, pause, resume, budget, cost, retry', async () => {
    const h = await harness.start({ label: 'ops', workers: 0, sim: { failPlates: ['OPS0001'] } });
    await h.enqueue('ops', ['OPS0000', 'OPS0001']);
    h.startWorker();
    await h.waitForBatch('ops');
    const json = async (args: string[]) => {
      const r = await vqb(h, [...args, '--json']);
      expect(r.stderr).toBe('');
      expect(r.code).toBe(0);
      return JSON.parse(r.stdout);
    };
    expect(await json(['status', 'ops'])).toMatchObject({ id: 'ops', counts: { done: 1, failed: 1 } });
    expect((await json(['pause'])).accounts[0]).toMatchObject({
      account: 'default',
      paused: true,
      pause: { code: 'PAUSED_BY_OPERATOR' },
    });
    expect((await json(['status'])).accounts[0]).toMatchObject({ account: 'default', line: { paused: true } });
    expect((await json(['resume'])).accounts[0].paused).toBe(false);
    expect((await json(['budget', '--per-day', '100'])).caps).toMatchObject({ perDay: 100 });
    const [today] = await json(['cost', '--days', '1']);
    expect(today.counts).toMatchObject({ creates: 2 });
    expect(await json(['retry', 'ops'])).toEqual({ retried: 1, recreated: 0, skipped: 0, workersAlive: 1 });
  });
});

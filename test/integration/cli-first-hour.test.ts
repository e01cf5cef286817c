// Issue 22, the CLI as a newcomer meets it: every defect found in the first hour, each shown by
// running `vqb` as a user does (real Redis, the simulator over HTTP): in this process (runVqb), or
// spawned where the test is about the process (its pipe, its signals). Needs `npm run build`.
import { writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { type Harness, makePlates, useHarness } from '../helpers/engine.js';
import { freePort, harnessEnv, runVqb, spawnVqb, startVqb, waitFor } from '../helpers/process.js';

const harness = useHarness();

/** `vqb <args>` in this process, with the harness's settings (and `env`). */
function vqb(h: Harness, args: string[], env: Record<string, string> = {}) {
  return runVqb(args, harnessEnv(h, env));
}

/** `vqb <args>` as a child process, for a test about its pipe or its signals. */
function vqbProcess(h: Harness, args: string[], env: Record<string, string> = {}) {
  return spawnVqb(args, harnessEnv(h, env));
}

/** A file of `plates` in the harness's folder; returns its path. */
async function plateFile(h: Harness, name: string, plates: string[]): Promise<string> {
  const file = join(h.config.outDir, '..', name);
  await writeFile(file, `placa\r\n${plates.join('\r\n')}\r\n`);
  return file;
}

/** Runs a file to the end with `vqb run`; returns its batch id. */
async function finishedBatch(h: Harness, file: string): Promise<string> {
  const run = await vqb(h, ['run', file]);
  expect(run.code, run.stderr).toBe(0);
  const id = /batch (\S+): \d+ rows/.exec(run.stdout)?.[1];
  expect(id).toBeDefined();
  return id!;
}

/** No stack trace, no raw error object: one `vqb: …` line per problem. */
function expectNoTrace(stderr: string): void {
  expect(stderr).not.toMatch(/^\s+at /m);
  expect(stderr).not.toMatch(/unexpected error/);
}

describe('the CLI a newcomer meets (issue 22)', () => {
  it('1: pause/resume of an unknown account is one line naming the configured accounts, exit 2', async () => {
    const h = await harness.start({ label: 'cli1', workers: 0 });
    for (const command of ['pause', 'resume']) {
      const { code, stdout, stderr } = await vqb(h, [command, '--account', 'nope']);
      expectNoTrace(stderr);
      expect(stderr).toBe('vqb: no account "nope"; configured: default\n');
      expect(stdout).toBe('');
      expect(code).toBe(2);
    }
  });

  it('2: a reader that goes away (`vqb status | head`) ends the command quietly, no EPIPE trace', async () => {
    const h = await harness.start({ label: 'cli2', workers: 0 });
    const child = vqbProcess(h, ['status']);
    // The reader closes before the first line is written, as `head -0` would.
    child.child.stdout!.destroy();
    const { code, stderr } = await child.done;
    expect(stderr).not.toMatch(/EPIPE/);
    expectNoTrace(stderr);
    expect(code).toBe(0);
  });

  it('3: cost --days takes 1..400 and says so otherwise; days print as dates', async () => {
    const h = await harness.start({ label: 'cli3', workers: 0 });
    for (const bad of ['x', '0', '401', '1.5']) {
      const { code, stderr } = await vqb(h, ['cost', '--days', bad]);
      expect(stderr, bad).toBe(`vqb: --days takes a whole number of days from 1 to 400; got "${bad}"\n`);
      expect(code).toBe(2);
    }
    const negative = await vqb(h, ['cost', '--days', '-3']);
    expect(negative.stderr).toMatch(/^vqb: --days needs a value; a value starting with "-" is written --days=-VALUE/);
    expect(negative.code).toBe(2);
    const ok = await vqb(h, ['cost', '--days', '2']);
    expect(ok.code).toBe(0);
    const days = ok.stdout.trimEnd().split('\n').slice(1);
    expect(days).toHaveLength(2);
    const today = new Date().toISOString().slice(0, 10);
    expect(days[0]).toMatch(new RegExp(`^${today} `));
  });

  it('5, 6, 8: prune speaks in days; status of a finished batch claims no share; retry says a worker is needed', async () => {
    const h = await harness.start({ label: 'cli5', workers: 0, sim: { failPlates: ['FAI1L00'] } });
    const prune = await vqb(h, ['prune', '--dry-run'], { VQ_RETAIN: '30d' });
    expect(prune.stdout).toContain('0 batches to prune (finished more than 30 days ago)');
    expect(prune.stdout).not.toMatch(/\d{5,} s/);

    const id = await finishedBatch(h, await plateFile(h, 'five.csv', ['ABC1D23', 'ABC1D24', 'FAI1L00']));
    const status = await vqb(h, ['status', id]);
    expect(status.code).toBe(0);
    expect(status.stdout).not.toMatch(/% of (its|the account's) creates/);
    expect(status.stdout).toMatch(/finished \d{4}-\d\d-\d\d \d\d:\d\d(:\d\d)? UTC \((just now|\d+ s ago)\)/);

    // No `vqb work` runs against this queue: the retried plate waits for one, and the command says so.
    const retry = await vqb(h, ['retry', id]);
    expect(retry.code).toBe(0);
    expect(retry.stdout).toContain('1 failed plate queued again');
    expect(retry.stdout).toMatch(/no worker is running for account default: start `vqb work`/);
  });

  it('7: a worker stopped with SIGTERM says nothing after "worker stopped", and no Redis outage', async () => {
    // Queries that take 1-2 s: the stop comes while creates and polls are out.
    const h = await harness.start({ label: 'cli7', workers: 0, sim: { completionMs: [1_000, 2_000] } });
    await h.enqueue('b7', makePlates(40));
    // In this process (`main` with its own stderr): the stop as SIGTERM hands it to io.stopSignal.
    const work = startVqb(
      ['work'],
      harnessEnv(h, { LOG_LEVEL: 'info', VQ_METRICS_PORT: String(await freePort()), VQ_RETAIN: '30d' }),
    );
    await waitFor(async () => work.output().stderr.includes('"worker started"'), 20_000, 'worker started');
    await waitFor(async () => h.sim.stats().creates > 0, 20_000, 'creates out');
    const { code, stderr } = await work.stop('SIGTERM');
    expect(code).toBe(0);
    const messages = stderr
      .trimEnd()
      .split('\n')
      .map((line) => (JSON.parse(line) as { msg: string }).msg);
    expect(messages.at(-1)).toBe('worker stopped');
    expect(messages.join('\n')).not.toMatch(/redis connection lost/);
  });

  it('9: a file that is not there is a usage error with its reason (exit 2)', async () => {
    const h = await harness.start({ label: 'cli9', workers: 0 });
    const missing = await vqb(h, ['run', '/nonexistent.csv']);
    expect(missing.stderr).toBe('vqb: cannot read /nonexistent.csv: no such file (ENOENT)\n');
    expect(missing.code).toBe(2);
    const dir = dirname(h.config.outDir);
    const folder = await vqb(h, ['run', dir]);
    expect(folder.stderr).toBe(`vqb: cannot read ${dir}: it is a folder, not a file\n`);
    expect(folder.code).toBe(2);
  });

  it('10: piped, with no LOG_LEVEL, `vqb run` prints plain progress lines and no JSON among them', async () => {
    const h = await harness.start({ label: 'cli10', workers: 0 });
    const file = await plateFile(h, 'ten.csv', ['ABC1D23', 'ABC1D24', 'ABC1D25', 'ABC1D26']);
    const env = harnessEnv(h);
    delete (env as Record<string, string | undefined>).LOG_LEVEL;
    const { code, stdout, stderr } = await runVqb(['run', file], env);
    expect(code, stderr).toBe(0);
    const lines = `${stdout}${stderr}`.split('\n').filter((l) => l !== '');
    expect(lines.filter((l) => l.startsWith('{'))).toEqual([]);
    expect(stdout).toMatch(/^progress 4\/4 \(4 done, 0 failed\)/m);
  });
});

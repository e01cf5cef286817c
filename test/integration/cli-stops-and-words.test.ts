// Issue 36, the CLI's stops, states, flags and words: each defect as a user met it, by running
// `vqb` (real Redis, the simulator over HTTP): in this process (runVqb), or spawned where the test
// is about the process (its signals). Needs `npm run build`.
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import ExcelJS from 'exceljs';
import { describe, expect, it } from 'vitest';
import { enqueue } from '../../src/producers/enqueue.js';
import { type Harness, makePlates, useHarness } from '../helpers/engine.js';
import { freePort, harnessEnv, runVqb, spawnVqb, waitFor } from '../helpers/process.js';
import { startRedisServer } from '../helpers/redis-server.js';

const harness = useHarness();

/** `vqb <args>` in this process, with the harness's settings (and `env`); a hang fails on the test's timeout. */
function vqb(h: Harness, args: string[], env: Record<string, string> = {}) {
  return runVqb(args, harnessEnv(h, env));
}

/** `vqb <args>` as a child process, for a test that signals it. */
function vqbProcess(h: Harness, args: string[], env: Record<string, string> = {}, timeoutMs?: number) {
  return spawnVqb(args, harnessEnv(h, env), timeoutMs);
}

/** A file named `name` in the harness's folder holding `text`; returns its path. */
async function fileOf(h: Harness, name: string, text: string | Buffer): Promise<string> {
  const file = join(h.config.outDir, '..', name);
  await writeFile(file, text);
  return file;
}

const plateCsv = (plates: string[]) => `placa\r\n${plates.join('\r\n')}\r\n`;

/** No stack trace, no raw error object: one `vqb: …` line. */
function expectOneLine(stderr: string): void {
  expect(stderr).not.toMatch(/^\s+at /m);
  expect(stderr).not.toMatch(/unexpected error/);
  expect(stderr.trimEnd().split('\n')).toHaveLength(1);
  expect(stderr).toMatch(/^vqb: /);
}

/** A port held by another listener for the length of `fn`. */
async function withBusyPort<T>(fn: (port: number) => Promise<T>): Promise<T> {
  const server: Server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '0.0.0.0', resolve));
  try {
    return await fn((server.address() as { port: number }).port);
  } finally {
    server.close();
  }
}

describe('the CLI, second pass (issue 36)', () => {
  it('1: an interactive batch over VQ_INTERACTIVE_MAX is refused before anything is stored; the file then runs', async () => {
    const h = await harness.start({ label: 'cli36-1', workers: 0 });
    const env = { VQ_INTERACTIVE_MAX: '5' };
    const file = await fileOf(h, 'eight.csv', plateCsv(makePlates(8)));
    // The dry run says it, in the run's words and exit code.
    const dry = await vqb(h, ['run', file, '--priority', 'interactive', '--dry-run'], env);
    expect(dry.stderr).toMatch(
      /^vqb: an interactive batch holds at most 5 plates \(VQ_INTERACTIVE_MAX\); this one has 8/,
    );
    expect(dry.code).toBe(2);
    const refused = await vqb(h, ['run', file, '--priority', 'interactive'], env);
    expectOneLine(refused.stderr);
    expect(refused.stderr).toMatch(/at most 5 plates .*this one has 8: send it as normal or bulk/);
    expect(refused.code).toBe(2);
    expect((await h.services.batchViews.list()).total, 'no batch left behind').toBe(0);
    // The API's door (the same enqueue): a 422 that leaves nothing behind either.
    const over = makePlates(h.config.interactiveMax + 1);
    await expect(
      enqueue(h.services, { source: 'api', plates: over }, { priority: 'interactive' }),
    ).rejects.toMatchObject({ code: 'TOO_MANY_FOR_INTERACTIVE' });
    expect((await h.services.batchViews.list()).total).toBe(0);
    // The same file, as a normal batch: it runs to the end.
    const normal = await vqb(h, ['run', file], env);
    expect(normal.code, normal.stderr).toBe(0);
    expect(normal.stdout).toMatch(/8\/8 finished, 8 done/);
  });

  it('2: a file whose column holds no plates is refused (exit 2, the columns named); the dry run names the column', async () => {
    const h = await harness.start({ label: 'cli36-2', workers: 0 });
    const names = await fileOf(h, 'nomes.csv', 'nome;cidade\nMaria;Recife\nJoão;Natal\nAna;Belém\n');
    const r = await vqb(h, ['run', names]);
    expectOneLine(r.stderr);
    expect(r.stderr).toMatch(/no column of the file holds plates: column "nome" .* 0 of its 3 rows/);
    expect(r.stderr).toContain('the columns are "nome", "cidade"');
    expect(r.code).toBe(2);
    // Random junk: a few strings happen to look like plates; the file is still no plate list.
    const junk = Array.from({ length: 20_000 }, () => randomBytes(6).toString('base64url').toUpperCase()).join('\n');
    const j = await vqb(h, ['run', await fileOf(h, 'junk.csv', `${junk}\n`)]);
    expectOneLine(j.stderr);
    // (its first line is data, or a header when it happens to hold no digit)
    expect(j.stderr).toMatch(
      /no column of the file holds plates: column ".+" was picked by its content, but only \d+ of/,
    );
    expect(j.code).toBe(2);
    expect((await h.services.batchViews.list()).total, 'nothing stored').toBe(0);
    expect(h.sim.stats().requests, 'nothing paid').toBe(0);
    // Named by the user, a column is taken as asked (its non-plates are rejects, as before).
    const asked = await vqb(h, ['run', names, '--column', 'cidade', '--dry-run']);
    expect(asked.code, asked.stderr).toBe(0);
    expect(asked.stdout).toContain('plate column "cidade" (as --column asked)');
    const good = await fileOf(h, 'good.csv', plateCsv(makePlates(3)));
    const dry = await vqb(h, ['run', good, '--dry-run']);
    expect(dry.stdout).toContain('plate column "placa" (by its header)');
  });

  it('6: `vqb export --out /proc/x` ends with one line; a command stuck on Redis ends at SIGTERM', async () => {
    const h = await harness.start({ label: 'cli36-6', workers: 0 });
    await h.enqueue('b6', makePlates(2));
    const r = await vqb(h, ['export', 'b6', '--out', '/proc/vqb-x']);
    expectOneLine(r.stderr);
    expect(r.stderr).toMatch(/^vqb: cannot write exports to \/proc\/vqb-x: the file system said ENOENT/);
    expect(r.code).toBe(1);
    // A Redis that accepts and never answers: `vqb export` waits on it, and SIGTERM ends it.
    const silent = createServer(() => {});
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    // Stuck once it has connected (its signal handlers are set before any command runs): a fixed
    // 1.5 s let a start slowed by a loaded CI machine meet SIGTERM before them.
    const connected = once(silent, 'connection');
    try {
      const port = (silent.address() as { port: number }).port;
      const stuck = vqbProcess(h, ['export', 'b6'], { REDIS_URL: `redis://127.0.0.1:${port}` }, 30_000);
      await connected;
      await new Promise((r) => setTimeout(r, 200));
      stuck.child.kill('SIGTERM');
      const stopped = await stuck.done;
      expect(stopped.signal, 'not killed by the timeout').toBeNull();
      expect(stopped.stderr).toMatch(/^vqb: stopped \(SIGTERM\) before `vqb export` finished$/m);
      expect(stopped.code).toBe(130);
    } finally {
      silent.close();
    }
  });

  it('7: a second Ctrl-C stops at once and still prints how to resume', async () => {
    // Creates that take 8 s to answer: the first stop waits for them (shutdown timeout 60 s).
    const h = await harness.start({ label: 'cli36-7', workers: 0, sim: { slowCreateRate: 1, slowCreateMs: 8_000 } });
    const file = await fileOf(h, 'seven.csv', plateCsv(makePlates(6)));
    const run = vqbProcess(h, ['run', file, '--shutdown-timeout', '60s']);
    let out = '';
    run.child.stdout!.on('data', (c: Buffer) => (out += c.toString()));
    await waitFor(async () => h.sim.stats().creates > 0 || h.sim.stats().requests > 0, 20_000, 'a create sent');
    run.child.kill('SIGINT');
    await waitFor(async () => out.includes('stopping: letting running requests finish'), 10_000, 'first stop');
    run.child.kill('SIGINT');
    const r = await run.done;
    expect(r.signal).toBeNull();
    expect(r.code).toBe(130);
    expect(r.stdout).toContain('second stop: not waiting for running requests');
    expect(r.stdout).toMatch(/run the same command again to resume batch seven-/);
  });

  it('8: an unreachable upstream stops the run (exit 3, plain words); the next run does not open with the old outage', async () => {
    const h = await harness.start({ label: 'cli36-8', workers: 0 });
    const file = await fileOf(h, 'eight.csv', plateCsv(makePlates(4)));
    const quiet = harnessEnv(h, { VQ_BASE_URL: `http://127.0.0.1:${await freePort()}`, VQ_ATTEMPTS: '3' });
    delete (quiet as Record<string, string | undefined>).LOG_LEVEL;
    const down = await runVqb(['run', file], quiet);
    expect(down.code).toBe(3);
    expect(down.stderr).toMatch(
      /^vqb: cannot go on: upstream unreachable since .*: connection refused; \d+ requests in a row/m,
    );
    expect(`${down.stdout}${down.stderr}`, 'no JSON among the words').not.toMatch(/^\{/m);
    expect(down.stdout).toMatch(/run the same command again to resume batch eight-/);
    // The upstream is back: the run finishes, and never shows the outage it did not see.
    const back = harnessEnv(h);
    delete (back as Record<string, string | undefined>).LOG_LEVEL;
    const up = await runVqb(['run', file], back);
    expect(up.code, up.stderr).toBe(0);
    expect(up.stdout).not.toMatch(/unreachable since/);
    // A key the upstream refuses: exit 3, and no JSON log line either.
    const badKey = await fileOf(h, 'badkey', 'wrong-key-000000000000\n');
    const other = await fileOf(h, 'other.csv', plateCsv(makePlates(2, 50)));
    const refused = await runVqb(['run', other], { ...back, VQ_API_KEY_FILE: badKey });
    expect(refused.code).toBe(3);
    expect(`${refused.stdout}${refused.stderr}`).not.toMatch(/^\{/m);
  });

  it('9: the demo says how to look at its batch afterwards, and that command finds it', async () => {
    const redis = await startRedisServer();
    try {
      const h = await harness.start({ label: 'cli36-9', workers: 0 });
      const file = await fileOf(h, 'demo.csv', plateCsv(makePlates(3)));
      const env = {
        PATH: process.env.PATH ?? '',
        REDIS_URL: redis.url,
        VQ_OUT_DIR: h.config.outDir,
        LOG_LEVEL: 'warn',
      };
      const demo = await runVqb(['demo', '--file', file], env);
      expect(demo.code, demo.stderr).toBe(0);
      const hint = /^to look at this batch later: (vqb status (\S+) --prefix '\{vqb-demo\}')/m.exec(demo.stdout);
      expect(hint, demo.stdout).not.toBeNull();
      const status = await runVqb(['status', hint![2]!, '--prefix', '{vqb-demo}'], env);
      expect(status.code, status.stderr).toBe(0);
      expect(status.stdout).toMatch(/3\/3 finished/);
    } finally {
      await redis.close();
    }
  });

  it('10: simulate, serve and work --metrics-port on a port in use: one line, exit 2', async () => {
    const h = await harness.start({ label: 'cli36-10', workers: 0 });
    await withBusyPort(async (port) => {
      const runs = [
        vqb(h, ['simulate', '--port', String(port)]),
        vqb(h, ['serve', '--no-inbox'], { VQ_HTTP_PORT: String(port), VQ_API_TOKENS: 'tok-0123456789abcdef' }),
        vqb(h, ['work', '--metrics-port', String(port)]),
      ];
      for (const run of runs) {
        const r = await run;
        expectOneLine(
          r.stderr
            .split('\n')
            .filter((l) => !l.startsWith('{'))
            .join('\n'),
        );
        expect(r.stderr).toMatch(new RegExp(`^vqb: cannot listen on .*:${port}: the port is in use`, 'm'));
        expect(r.code).toBe(2);
      }
    });
  });

  it('14: flags are checked, "fix the command" is exit 2 throughout, settings go before the command, --version', async () => {
    const h = await harness.start({ label: 'cli36-14', workers: 0 });
    for (const bad of ['abc', '-1', '1.5']) {
      const r = await vqb(h, ['status', `--limit=${bad}`]);
      expect(r.stderr, bad).toBe(`vqb: --limit takes a whole number of batches from 0 to 1000; got "${bad}"\n`);
      expect(r.code).toBe(2);
    }
    for (let i = 0; i < 3; i++) await h.enqueue(`b14-${i}`, makePlates(1, i));
    const none = await vqb(h, ['status', '--limit', '0']);
    expect(none.stdout).toMatch(/^batches: 3 \(newest 0\)$/m);
    expect(none.stdout).not.toMatch(/^batch b14/m);
    const two = await vqb(h, ['status', '--limit', '2']);
    expect(two.stdout.match(/^batch b14-\d/gm)).toHaveLength(2);

    const file = await fileOf(h, 'f14.csv', plateCsv(makePlates(2)));
    const column = await vqb(h, ['run', file, '--column', 'zzz']);
    expect(column.stderr).toMatch(/^vqb: no column named "zzz"/);
    expect(column.code).toBe(2);
    const wb = new ExcelJS.Workbook();
    wb.addWorksheet('Placas').addRow(['placa']);
    wb.getWorksheet('Placas')!.addRow(['ABC1D23']);
    const book = await fileOf(h, 'f14.xlsx', Buffer.from(await wb.xlsx.writeBuffer()));
    const sheet = await vqb(h, ['run', book, '--sheet', 'Nope']);
    expect(sheet.stderr).toMatch(/^vqb: no sheet named "Nope"/);
    expect(sheet.code).toBe(2);
    const empty = await vqb(h, ['run', await fileOf(h, 'empty.csv', '')]);
    expect(empty.stderr).toBe('vqb: the file is empty\n');
    expect(empty.code).toBe(2);
    const missing = await vqb(h, ['run', join(h.config.outDir, 'nope.csv')]);
    expect(missing.code).toBe(2);

    // The environment names a Redis with nothing on it; the flag before the command wins.
    const before = await vqb(h, ['--redis-url', h.config.redisUrl, 'status'], { REDIS_URL: 'redis://127.0.0.1:1' });
    expect(before.code, before.stderr).toBe(0);
    expect(before.stdout).toMatch(/^batches: 3/m);
    const version = await vqb(h, ['--version']);
    expect(version.stdout).toMatch(/^vqb \d+\.\d+\.\d+\n$/);
    expect(version.code).toBe(0);
  });

  it('15: the words: a setting out of range, counts of one, a resume of nothing, a raised cap, a cap on the progress line', async () => {
    const h = await harness.start({ label: 'cli36-15', workers: 0 });
    const zero = await vqb(h, ['status', '--concurrency', '0']);
    expect(zero.stderr).toBe('vqb: VQ_CONCURRENCY: must be at least 1; got "0"\n');
    expect(zero.code).toBe(2);

    const one = await fileOf(h, 'one.csv', 'placa\nABC1D23\nABC1D23\n');
    const dry = await vqb(h, ['run', one, '--dry-run']);
    expect(dry.stdout).toContain('  2 rows: 1 distinct valid plate, 0 rejected, 1 duplicate');
    const ran = await vqb(h, ['run', await fileOf(h, 'single.csv', 'placa\nABC1D24\n')]);
    expect(ran.stdout).toMatch(/: 1 row, 1 plate enqueued, 0 rejected, 0 duplicates \(plate column "placa"\)/);

    const resume = await vqb(h, ['resume']);
    expect(resume.stdout).toBe('account default was not paused; nothing to resume\n');

    // A batch held at its cap of 2 creates: the run says why it stopped (issue 46: it ends there,
    // exit 4, instead of waiting); a higher cap says how many go on.
    const capped = await fileOf(h, 'capped.csv', plateCsv(makePlates(12, 100)));
    const piped = harnessEnv(h);
    delete (piped as Record<string, string | undefined>).LOG_LEVEL;
    const run = await runVqb(['run', capped, '--max-creates', '2'], piped);
    expect(run.code, run.stderr).toBe(4);
    expect(run.stdout).toMatch(/creates wait: the batch reached its cap of 2 creates/);
    const id = /batch (\S+): 12 rows/.exec(run.stdout)![1]!;
    const raised = await vqb(h, ['budget', id, '--max-creates', '7']);
    expect(raised.stdout).toMatch(
      new RegExp(`^batch ${id}: create cap 7; 5 of 10 queued plates go on \\(the cap allows 5 more creates\\)$`, 'm'),
    );
  });
});

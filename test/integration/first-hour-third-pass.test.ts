// Issue 46, the first hour, third pass: money never moves by accident, and `vqb` says what is true.
// Each test runs `vqb` as a user does (real Redis, the simulator over HTTP): in this process (runVqb),
// or spawned where the test is about the process (a terminal, signals, Node). Needs `npm run build`.
import { execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { readdir, readFile, writeFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ingestList } from '../../src/producers/enqueue.js';
import { Retention } from '../../src/retention.js';
import { createHttpApi } from '../../src/server.js';
import { archiveFor } from '../../src/sinks/export.js';
import { Watches } from '../../src/watch/watches.js';
import { signIn } from '../helpers/console.js';
import { type Harness, makePlates, useHarness } from '../helpers/engine.js';
import { BIN, freePort, harnessEnv, runVqb, startVqb, waitFor } from '../helpers/process.js';
import { startRedisServer } from '../helpers/redis-server.js';

const harness = useHarness();

/** `vqb <args>` in this process; archives and other state in the harness's folder (VQ_ROOT), never in the clone. */
function vqb(h: Harness, args: string[], env: Record<string, string> = {}) {
  return runVqb(args, vqbEnv(h, env));
}

function vqbEnv(h: Harness, env: Record<string, string>): Record<string, string> {
  return harnessEnv(h, { VQ_ROOT: join(h.config.outDir, '..', 'data'), ...env });
}

/**
 * `vqb` on a terminal: `script` gives it a pseudo-terminal for stdin and stdout; `answer` is typed
 * into it. Output comes back as the terminal shows it (CR LF).
 */
async function vqbOnTerminal(h: Harness, args: string[], env: Record<string, string>, answer: string) {
  const command = [process.execPath, BIN, ...args].map((a) => `'${a.replaceAll("'", "'\\''")}'`).join(' ');
  const child = spawn('script', ['-qec', command, '/dev/null'], {
    env: vqbEnv(h, env),
  });
  let out = '';
  child.stdout.on('data', (c: Buffer) => {
    out += c.toString();
    if (/Go on\? \[y\/N\]/.test(out) && answer !== '') {
      child.stdin.write(answer);
      answer = '';
    }
  });
  child.stderr.on('data', (c: Buffer) => (out += c.toString()));
  const [code] = await once(child, 'exit');
  return { code: code as number, out: out.replaceAll('\r', '') };
}

/** A file of `plates` named `name` in the harness's folder; returns its path. */
async function plateFile(h: Harness, name: string, plates: string[]): Promise<string> {
  const file = join(h.config.outDir, '..', name);
  await writeFile(file, `placa\r\n${plates.join('\r\n')}\r\n`);
  return file;
}

/** The machine's own Node 20 where it has one (Debian's), else the launcher told to believe it is 20. */
function oldNode(): { node: string; env: Record<string, string> } {
  const system = '/usr/bin/node';
  if (existsSync(system)) {
    const major = Number(execFileSync(system, ['-p', 'process.versions.node'], { encoding: 'utf8' }).split('.')[0]);
    if (major < 24) return { node: system, env: {} };
  }
  return { node: process.execPath, env: { VQB_TEST_NODE_VERSION: '20.0.0' } };
}

describe('the first hour, third pass (issue 46)', () => {
  it('7: on Node 20, `vqb --version` says in one line which Node it needs and how to get it, exit 2', async () => {
    const { node, env } = oldNode();
    const child = spawn(node, [BIN, '--version'], { env: { PATH: process.env.PATH ?? '', ...env } });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    const [code] = await once(child, 'exit');
    expect(stdout).toBe('');
    expect(stderr).toMatch(
      /^vqb: needs Node\.js 24 LTS or newer \(this is Node 20\.[\d.]+\); get it with `nvm install 24`/,
    );
    expect(stderr.trimEnd().split('\n')).toHaveLength(1);
    expect(stderr).not.toMatch(/^\s+at /m);
    expect(code).toBe(2);
  });

  it('1: a demo of a file run for real never touches that batch or its exports (same out folder)', async () => {
    const h = await harness.start({ label: 'q46-1', workers: 0 });
    const file = await plateFile(h, 'frota.csv', makePlates(3));
    const real = await vqb(h, ['run', file]);
    expect(real.code, real.stderr).toBe(0);
    const realId = /batch (\S+): \d+ rows/.exec(real.stdout)![1]!;
    const realCsv = join(h.config.outDir, `${realId}.csv`);
    const before = await readFile(realCsv, 'utf8');
    // The demo on a Redis of its own (it clears its prefix), writing to the same out folder.
    const redis = await startRedisServer();
    try {
      const env = {
        PATH: process.env.PATH ?? '',
        REDIS_URL: redis.url,
        VQ_OUT_DIR: h.config.outDir,
        LOG_LEVEL: 'warn',
      };
      const demo = await runVqb(['demo', '--file', file], env);
      expect(demo.code, demo.stderr).toBe(0);
      const demoId = /batch (\S+): \d+ rows/.exec(demo.stdout)![1]!;
      expect(demoId).toBe(`demo-${realId}`);
      expect(demo.stdout).toContain(join(h.config.outDir, `${demoId}.csv`));
    } finally {
      await redis.close();
    }
    expect(await readFile(realCsv, 'utf8')).toBe(before);
    // Each batch has its own exports, side by side.
    expect(await readdir(h.config.outDir)).toEqual(expect.arrayContaining([`${realId}.csv`, `demo-${realId}.csv`]));
  });

  it('3: delete --cancel of a batch none of whose plates was ever created drops them all and finishes it at once', async () => {
    const h = await harness.start({ label: 'q46-3', workers: 1 });
    // A cap of 0: the plates the feeder put on the queue sleep, held, and nothing is ever sent.
    await ingestList(h.services, makePlates(12), { source: 'library', batchId: 'never-sent', maxCreates: 0 });
    await waitFor(async () => (await h.services.batchViews.get('never-sent')).blocked === 'budget', 20_000, 'held');
    await waitFor(async () => ((await h.queue.getJobCounts('delayed')).delayed ?? 0) > 0, 20_000, 'a held job');
    const cancel = await vqb(h, ['delete', 'never-sent', '--cancel']);
    expect(cancel.code, cancel.stderr).toBe(0);
    expect(cancel.stdout).not.toMatch(/still running/);
    expect(cancel.stdout).toMatch(/^batch never-sent archived and deleted from Redis/m);
    expect(h.sim.stats().creates).toBe(0);
    expect(await h.services.batches.exists('never-sent')).toBe(false);
    expect((await h.queue.getJobCounts('delayed', 'wait', 'prioritized')).delayed).toBe(0);
  });

  it('5: `vqb run` at a cap the user set ends: exports of what finished (the rest pending), how to go on, exit 4', async () => {
    const h = await harness.start({ label: 'q46-5', workers: 0 });
    const file = await plateFile(h, 'capped.csv', makePlates(6));
    const run = await vqb(h, ['run', file, '--max-creates', '2']);
    expect(run.stderr).toBe('');
    expect(run.code, run.stdout).toBe(4);
    const id = /batch (\S+): \d+ rows/.exec(run.stdout)![1]!;
    expect(run.stdout).toMatch(/2\/6 finished, 2 done/);
    expect(run.stdout).toMatch(/stopped at the spending cap: 4 plates not looked up, nothing lost/);
    expect(run.stdout).toContain(`vqb budget ${id} --max-creates N`);
    const csv = await readFile(join(h.config.outDir, `${id}.csv`), 'utf8');
    expect(csv.match(/^\d+;\w+;\w+;done;/gm)).toHaveLength(2);
    expect(csv.match(/^\d+;\w+;\w+;pending;/gm)).toHaveLength(4);
    expect(h.sim.stats().creates).toBe(2);
    // Raised, the same command resumes the batch and finishes it.
    const raised = await vqb(h, ['budget', id, '--max-creates', 'none']);
    expect(raised.code, raised.stderr).toBe(0);
    const again = await vqb(h, ['run', file]);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).toMatch(/6\/6 finished/);
    expect(h.sim.stats().creates).toBe(6);
  });

  it('4: on a terminal, a run above VQ_CONFIRM_ABOVE asks first (in money with a price); no is nothing; --yes and no terminal do not ask', async () => {
    const h = await harness.start({ label: 'q46-4', workers: 0 });
    const file = await plateFile(h, 'five.csv', makePlates(5));
    const priced = { VQ_CONFIRM_ABOVE: '1', VQ_PRICE_PER_QUERY: '0.35' };
    const declined = await vqbOnTerminal(h, ['run', file], priced, 'n\n');
    expect(declined.out).toMatch(
      /would send 5 paid creates \(R\$ 1,75\) for account default, above VQ_CONFIRM_ABOVE \(R\$ 1,00\)\. Go on\? \[y\/N\]/,
    );
    expect(declined.out).toMatch(/nothing stored or sent/);
    expect(declined.code).toBe(1);
    expect(h.sim.stats().creates).toBe(0);
    expect((await h.services.batchViews.list()).total).toBe(0);
    // Without a price the threshold is in creates; at it, nothing is asked.
    const under = await vqbOnTerminal(h, ['run', file], { VQ_CONFIRM_ABOVE: '5' }, 'n\n');
    expect(under.out).not.toMatch(/Go on\?/);
    expect(under.code, under.out).toBe(0);
    expect(h.sim.stats().creates).toBe(5);
    const yes = await vqbOnTerminal(
      h,
      ['run', await plateFile(h, 'six.csv', makePlates(6, 20)), '--yes'],
      { VQ_CONFIRM_ABOVE: '2' },
      'n\n',
    );
    expect(yes.out).not.toMatch(/Go on\?/);
    expect(yes.code, yes.out).toBe(0);
    // No terminal (a script, cron): nothing asked, nothing changes (runVqb: neither its stdin nor
    // its stdout is one).
    const four = await plateFile(h, 'four.csv', makePlates(4, 50));
    const piped = await vqb(h, ['run', four], { VQ_CONFIRM_ABOVE: '1' });
    expect(piped.code, piped.stderr).toBe(0);
    expect(piped.stdout + piped.stderr).not.toMatch(/Go on\?/);
    expect(h.sim.stats().creates).toBe(15);
  });

  it('2: the console never re-buys cancelled plates, calls them cancelled, and states the price of a paid retry before it sends it', async () => {
    const ADMIN = 'admin-token-0123456789abcdef';
    const h = await harness.start({
      label: 'q46-2',
      sim: { failPlates: ['NAO1A23', 'NAO1A24', 'NAO1A25'] },
      config: { VQ_API_TOKENS: ADMIN, VQ_PRICE_PER_QUERY: '0.35', VQ_CONFIRM_ABOVE: '1' },
    });
    const app = await createHttpApi({
      services: h.services,
      config: h.config,
      logger: h.logs.logger,
      dashboard: false,
    });
    try {
      await app.listen({ host: '127.0.0.1', port: 0 });
      const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
      const session = await signIn(base, ADMIN);
      const page = async (id: string) =>
        (
          await fetch(`${base}/batches/${id}`, { headers: { cookie: session.cookie, 'accept-language': 'pt-BR' } })
        ).text();
      const retry = (id: string, extra = '') =>
        fetch(`${base}/batches/${id}/retry`, {
          method: 'POST',
          redirect: 'manual',
          headers: {
            cookie: session.cookie,
            'content-type': 'application/x-www-form-urlencoded',
            'accept-language': 'pt-BR',
          },
          body: `csrf=${session.csrf}&way=ask${extra}`,
        });

      // A batch cancelled before anything was sent: its plates are cancelled, not failed, and not for sale.
      await ingestList(h.services, makePlates(6, 300), { source: 'library', batchId: 'called-off', maxCreates: 0 });
      await waitFor(async () => (await h.services.batchViews.get('called-off')).blocked === 'budget', 20_000, 'held');
      await new Retention(h.services, archiveFor(h.config), { retainMs: 0 }).cancel('called-off');
      const cancelled = await page('called-off');
      expect(cancelled).toContain('6 placas canceladas: nunca enviadas ao fornecedor, sem custo');
      expect(cancelled).not.toContain('data-retry=');
      expect(cancelled).not.toContain('o fornecedor já respondeu isto');
      expect(cancelled).toMatch(/<dt>canceladas \(nunca enviadas\)<\/dt><dd>6<\/dd>/);
      expect(cancelled).toMatch(/<dd data-field="failed">0<\/dd>/);
      expect(cancelled).toMatch(/data-field="state"[^>]*>cancelado</);
      // The CLI and the exports say it too: cancelled, not failed.
      const status = await vqb(h, ['status', 'called-off']);
      expect(status.stdout).toMatch(/^batch called-off \(library: library\) — cancelled, finished/m);
      expect(status.stdout).toMatch(/0 failed, 6 cancelled \(never sent, not charged\)/);
      const exported = await vqb(h, ['export', 'called-off', '--format', 'csv']);
      expect(exported.code, exported.stderr).toBe(0);
      const csv = await readFile(join(h.config.outDir, 'called-off.csv'), 'utf8');
      expect(csv.match(/^\d+;\w+;\w+;cancelled;/gm)).toHaveLength(6);
      const forged = await retry('called-off', '&confirmed=6');
      expect(forged.headers.get('location')).toContain('retried=0');
      expect(h.sim.stats().creates).toBe(0);

      // Item 17: a batch with a deadline says "prazo:" once, not "Prazo: prazo:".
      await ingestList(h.services, makePlates(1, 310), { source: 'library', batchId: 'due', deadline: '2h' });
      const due = await page('due');
      expect(due).toMatch(/<p data-deadline><span data-field="deadline"[^>]*>prazo: /);
      expect(due).not.toMatch(/Prazo: <span/);

      // Three plates the upstream answered "not found": asking again costs R$ 1,05, above R$ 1,00.
      await h.enqueue('not-found', ['NAO1A23', 'NAO1A24', 'NAO1A25']);
      await h.waitForBatch('not-found');
      const before = h.sim.stats().creates;
      const asked = await retry('not-found');
      expect(asked.status).toBe(200);
      const confirm = await asked.text();
      expect(confirm).toContain('Isto pergunta de novo ao fornecedor por 3 placas: 3 consultas novas, R$ 1,05.');
      expect(confirm).toContain('Pagar R$ 1,05 e perguntar de novo');
      expect(confirm).toContain('name="confirmed" value="3"');
      expect(h.sim.stats().creates).toBe(before);
      const sent = await retry('not-found', '&confirmed=3');
      expect(sent.status).toBe(303);
      expect(sent.headers.get('location')).toContain('retried=3&recreated=3');
    } finally {
      await app.close();
    }
  });

  it('6: budget, cost and status agree on today’s spend, a `vqb check --create` included', async () => {
    const h = await harness.start({ label: 'q46-6', workers: 0 });
    const priced = { VQ_PRICE_PER_QUERY: '0.35' };
    const check = await vqb(h, ['check', '--create', 'ABC1D23', '--yes'], priced);
    expect(check.code, check.stdout + check.stderr).toBe(0);
    const run = await vqb(h, ['run', await plateFile(h, 'two.csv', makePlates(2, 400))], priced);
    expect(run.code, run.stderr).toBe(0);
    const budget = await vqb(h, ['budget', '--json'], priced);
    const cost = await vqb(h, ['cost', '--days', '1', '--json'], priced);
    const status = await vqb(h, ['status', '--json'], priced);
    const fromBudget = JSON.parse(budget.stdout).spentMoney.today.amount;
    const fromCost = JSON.parse(cost.stdout)[0].spend[0].amount;
    const fromStatus = JSON.stringify(JSON.parse(status.stdout));
    expect(fromCost).toBeCloseTo(1.05, 6);
    expect(fromBudget).toBeCloseTo(fromCost, 6);
    expect(fromStatus).toContain('"today":{"amount":1.05');
    const words = await vqb(h, ['budget'], priced);
    expect(words.stdout).toMatch(/spent today R\$ 1,05/);
    expect(words.stdout).toMatch(/caps: today 2 \(no daily cap\).*check --create/);
  });

  it('13: status says when no worker runs an account with queued plates, and what to start; an idle account is not "running"', async () => {
    // Queries take 5 s upstream: the batch is still running when the worker's status is read.
    const h = await harness.start({ label: 'q46-13', workers: 0, sim: { completionMs: [5_000, 5_000] } });
    const idle = await vqb(h, ['status']);
    expect(idle.stdout).toMatch(/^account default \(.*\): idle \(nothing queued\)$/m);
    await h.enqueue('nobody-runs', makePlates(5, 600));
    const status = await vqb(h, ['status']);
    expect(status.code, status.stderr).toBe(0);
    expect(status.stdout).toMatch(/^account default \(.*\): no worker is running: its plates wait; start `vqb work`/m);
    expect(status.stdout).not.toMatch(/: running$/m);
    const one = await vqb(h, ['status', 'nobody-runs']);
    expect(one.stdout).toMatch(/^ {2}account default: no worker is running: .*start `vqb work`/m);
    // With a worker alive, the account is running.
    h.startWorker();
    await waitFor(async () => /: running$/m.test((await vqb(h, ['status'])).stdout), 20_000, 'running');
  });

  it('18: an unknown flag or command says "did you mean"; serve takes --port and --host; an unknown batch id is exit 2', async () => {
    const h = await harness.start({ label: 'q46-18', workers: 0 });
    const typo = await vqb(h, ['run', 'x.csv', '--max-spned', '3']);
    expect(typo.stderr).toBe(
      'vqb: unknown option --max-spned for `vqb run`; did you mean --max-spend? (see `vqb run --help`)\n',
    );
    expect(typo.code).toBe(2);
    const far = await vqb(h, ['status', '--no-such-flag']);
    expect(far.stderr).toBe('vqb: unknown option --no-such-flag for `vqb status` (see `vqb status --help`)\n');
    expect(far.stderr).not.toMatch(/positional|place it at the end/);
    const command = await vqb(h, ['stauts']);
    expect(command.stderr).toBe(
      'vqb: unknown command "stauts"; did you mean `vqb status`? (`vqb --help` lists them)\n',
    );
    expect(command.code).toBe(2);
    for (const args of [
      ['status', 'no-such-batch'],
      ['export', 'no-such-batch'],
      ['retry', 'no-such-batch'],
    ]) {
      const unknown = await vqb(h, args);
      expect(unknown.stderr, args.join(' ')).toMatch(/^vqb: no batch with id no-such-batch/);
      expect(unknown.code, args.join(' ')).toBe(2);
    }
    const port = await freePort();
    const serve = startVqb(['serve', '--port', String(port), '--host', '127.0.0.1', '--no-inbox'], vqbEnv(h, {}));
    try {
      await waitFor(
        async () => (await fetch(`http://127.0.0.1:${port}/healthz`).catch(() => undefined))?.status !== undefined,
        20_000,
        'serve on --port',
      );
    } finally {
      await serve.stop();
    }
  });

  it('14: after moving to an accounts file, status still lists the batches of the old account, as history', async () => {
    const h = await harness.start({ label: 'q46-14', workers: 1 });
    await h.enqueue('before-the-move', makePlates(2, 900));
    await h.waitForBatch('before-the-move');
    const file = join(h.config.outDir, '..', 'accounts.json');
    await writeFile(file, JSON.stringify({ accounts: [{ id: 'fleet', apiKeyFile: h.keyFile }] }));
    const env = harnessEnv(h, { VQ_ACCOUNTS_FILE: file });
    delete (env as Record<string, string | undefined>).VQ_API_KEY_FILE;
    const list = await runVqb(['status'], env);
    expect(list.stderr).toBe('');
    expect(list.code).toBe(0);
    expect(list.stdout).toMatch(/^account fleet /m);
    expect(list.stdout).toMatch(/^batch before-the-move .*— finished/m);
    expect(list.stdout).toMatch(/^ {2}account default is not configured now .*history/m);
    const one = await runVqb(['status', 'before-the-move'], env);
    expect(one.code, one.stderr).toBe(0);
    expect(one.stdout).toMatch(/account default is not configured now/);
    const json = await runVqb(['status', '--json'], env);
    expect(json.code, json.stderr).toBe(0);
    expect(JSON.parse(json.stdout).batches.total).toBe(1);
  });

  it('15: a file run under two accounts has one id in each: status, export, retry and delete take --account', async () => {
    const h = await harness.start({ label: 'q46-15', workers: 0, accounts: [{ id: 'north' }, { id: 'south' }] });
    const file = await plateFile(h, 'shared.csv', makePlates(2, 950));
    const ids: string[] = [];
    for (const account of ['north', 'south']) {
      const run = await vqb(h, ['run', file, '--account', account]);
      expect(run.code, run.stderr).toBe(0);
      ids.push(/batch (\S+): \d+ rows/.exec(run.stdout)![1]!);
    }
    expect(ids[0]).toBe(ids[1]);
    const id = ids[0]!;
    const ambiguous = await vqb(h, ['status', id]);
    expect(ambiguous.stderr).toMatch(/held by several accounts \(.*\): name the account \(`--account A`/);
    expect(ambiguous.code).toBe(2);
    const status = await vqb(h, ['status', id, '--account', 'south']);
    expect(status.code, status.stderr).toBe(0);
    expect(status.stdout).toMatch(/; account south\)/);
    const exported = await vqb(h, ['export', id, '--account', 'north', '--format', 'csv']);
    expect(exported.code, exported.stderr).toBe(0);
    const retried = await vqb(h, ['retry', id, '--account', 'north']);
    expect(retried.code, retried.stderr).toBe(0);
    expect(retried.stdout).toMatch(/0 failed plates queued again/);
    const deleted = await vqb(h, ['delete', id, '--account', 'south']);
    expect(deleted.code, deleted.stderr).toBe(0);
    expect(await h.services.batches.exists({ id, account: 'north' })).toBe(true);
    expect(await h.services.batches.exists({ id, account: 'south' })).toBe(false);
  });

  it('16: a watch round counts its failed plates; changes with nothing to show say so; no worker is said', async () => {
    const h = await harness.start({
      label: 'q46-16',
      workers: 0,
      sim: { completionMs: [20, 60], failPlates: ['NAO1A23'] },
      config: { VQ_WATCH_MIN_EVERY: '1s', VQ_WATCH_SWEEP: '200ms' },
    });
    const watches = new Watches(h.services, h.logs.logger);
    try {
      const file = await plateFile(h, 'frota.csv', [...makePlates(2, 970), 'NAO1A23']);
      const env = { VQ_WATCH_MIN_EVERY: '1s' };
      // No worker yet: the watch is added, and the answer says its rounds wait for one.
      const added = await vqb(h, ['watch', 'add', file, '--every', '1h'], env);
      expect(added.code, added.stderr).toBe(0);
      expect(added.stdout).toMatch(/^no worker is running: rounds start only while one is \(`vqb work`/m);
      const worker = h.startWorker();
      const ref = { account: 'default', name: 'frota' };
      await waitFor(async () => (await watches.store.round(ref, 1))?.closedAt !== undefined, 30_000, 'round 1');
      const show = await vqb(h, ['watch', 'show', 'frota'], env);
      expect(show.stdout).toMatch(/round 1: 3 plates, .*, 1 failed \(their last known results stand\)/);
      expect(show.stdout).not.toMatch(/no worker is running/);
      const changes = await vqb(h, ['watch', 'changes', 'frota'], env);
      expect(changes.code, changes.stderr).toBe(0);
      expect(changes.stdout).toBe('');
      expect(changes.stderr).toBe('watch frota: no changes in round 1\n');
      await worker.close();
      await waitFor(
        async () => /no worker is running/.test((await vqb(h, ['watch', 'show', 'frota'], env)).stdout),
        20_000,
        'no worker said',
      );
    } finally {
      await watches.close();
    }
  });

  it('18: --require-deadline --dry-run says the run would refuse a batch whose deadline cannot be met', async () => {
    const h = await harness.start({ label: 'q46-18b', workers: 0 });
    const file = await plateFile(h, 'late.csv', makePlates(300, 1000));
    const slow = { VQ_RATE_LIMIT: '1/s' };
    const dry = await vqb(h, ['run', file, '--dry-run', '--within', '1m', '--require-deadline'], slow);
    expect(dry.code, dry.stderr).toBe(0);
    expect(dry.stdout).toMatch(/deadline: not feasible/);
    expect(dry.stdout).toMatch(
      /--require-deadline: the run would refuse this batch \(exit 2, nothing stored or paid\)/,
    );
    const feasible = await vqb(h, ['run', file, '--dry-run', '--within', '1m']);
    expect(feasible.stdout).not.toMatch(/would refuse/);
  });
});

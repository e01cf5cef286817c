// Times a person reads in the CLI are on their clock (VQ_TIME_ZONE, else TZ), with the zone named;
// `--json` keeps ISO 8601. `vqb status` and `vqb watch` as a user runs them, against a batch, an
// account line and a watch in Redis: in process where that is what a child would print, else spawned
// (a child's own zone; needs `npm run build`).
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { localZone, wallClock } from '../../src/time-text.js';
import { Watches } from '../../src/watch/watches.js';
import { type Harness, makePlates, useHarness } from '../helpers/engine.js';
import { type Finished, harnessEnv, runVqb, spawnVqb } from '../helpers/process.js';

const harness = useHarness();
const open: Watches[] = [];
afterEach(async () => {
  for (const w of open.splice(0)) await w.close();
});

const SP = 'America/Sao_Paulo';

/** "2026-11-28 09:04" on the wall clock of `zone`: what the CLI should print for `at`. */
function wall(at: number, zone: string): string {
  const [y, mo, d, h, m] = wallClock(at, zone);
  const two = (n: number) => String(n).padStart(2, '0');
  return `${y}-${two(mo)}-${two(d)} ${two(h)}:${two(m)}`;
}

/** A time of day in UTC ISO form, or "… UTC": what a person in São Paulo should never be shown. */
const UTC_TEXT = /\d{4}-\d\d-\d\dT\d\d:\d\d|\d\d:\d\d(:\d\d)? UTC/;

/**
 * `vqb <args>` with `env`, in this process where a child would print the same: its zone (TZ) is this
 * process's, or VQ_TIME_ZONE names the same zone (the process's is read only without it). Otherwise
 * spawned: a process's own zone is Node's to set from TZ, and this one's cannot be the child's.
 */
function vqb(args: string[], env: Record<string, string>): Promise<Finished> {
  const sameClock = env.TZ === localZone() || (env.TZ !== undefined && env.TZ === env.VQ_TIME_ZONE);
  return sameClock ? runVqb(args, env) : spawnVqb(args, env, 30_000).done;
}

async function finishedBatch(h: Harness, id: string): Promise<number> {
  await h.enqueue(id, makePlates(3));
  h.startWorker();
  await h.waitForBatch(id, 20_000);
  return (await h.services.batchViews.get(id)).finishedAt!;
}

describe('times on the clock of VQ_TIME_ZONE', () => {
  it.each([
    ['TZ and VQ_TIME_ZONE both São Paulo', { TZ: SP, VQ_TIME_ZONE: SP }],
    ['VQ_TIME_ZONE alone (the process in UTC)', { TZ: 'UTC', VQ_TIME_ZONE: SP }],
    ['TZ alone (the default)', { TZ: SP }],
  ])(
    'vqb status says its instants in São Paulo, zone named: %s',
    async (_, zone) => {
      const h = await harness.start({ label: 'tz-status', workers: 0 });
      const finishedAt = await finishedBatch(h, 'tz-batch');
      // The account holds for ten minutes (a 429's wait) and its upstream stopped answering.
      await h.line.hold(10 * 60_000, 'rate_limit');
      const until = (await h.line.state()).limitedUntil!;
      const env = harnessEnv(h, zone);

      const list = await vqb(['status'], env);
      expect(list.code, list.stderr).toBe(0);
      expect(list.stdout).toContain(`finished ${wall(finishedAt, SP)}`);
      expect(list.stdout).toMatch(new RegExp(`finished ${wall(finishedAt, SP)}(:\\d\\d)? ${SP} \\(`));
      expect(list.stdout).toMatch(new RegExp(`rate limited until ${wall(until, SP)}(:\\d\\d)? ${SP}`));
      expect(list.stdout).not.toMatch(UTC_TEXT);

      const one = await vqb(['status', 'tz-batch'], env);
      expect(one.code, one.stderr).toBe(0);
      expect(one.stdout).toMatch(new RegExp(`finished ${wall(finishedAt, SP)}(:\\d\\d)? ${SP} \\(`));
      expect(one.stdout).not.toMatch(UTC_TEXT);

      // --json: instants stay ISO 8601 with their offset (Z), for programs.
      const json = await vqb(['status', 'tz-batch', '--json'], env);
      expect(JSON.parse(json.stdout)).toMatchObject({ finishedAt: new Date(finishedAt).toISOString() });
    },
    60_000,
  );

  it('vqb watch shows the next round and a window wait in São Paulo, zone named', async () => {
    const h = await harness.start({
      label: 'tz-watch',
      workers: 0,
      config: { VQ_WATCH_MIN_EVERY: '1s', VQ_TIME_ZONE: SP },
    });
    const watches = new Watches(h.services, h.logs.logger);
    open.push(watches);
    // A window of one minute two minutes from now (its ends are UTC): closed now, so a due round waits.
    const hhmm = (ms: number) => new Date(ms).toISOString().slice(11, 16);
    const opens = Date.now() + 2 * 60_000;
    await watches.add({ name: 'frota', every: '1h', window: `${hhmm(opens)}-${hhmm(opens + 60_000)}` }, makePlates(2), [
      'default',
    ]);
    const ref = { account: 'default', name: 'frota' };
    expect(await watches.rounds.fire(ref, 'tz-1')).toBe('window');
    const nextAt = (await watches.show(ref)).nextAt!;
    const env = harnessEnv(h, { TZ: SP, VQ_TIME_ZONE: SP });

    const show = await vqb(['watch', 'show', 'frota'], env);
    expect(show.code, show.stderr).toBe(0);
    expect(show.stdout).toMatch(new RegExp(`next round ${wall(nextAt, SP)}(:\\d\\d)? ${SP} \\(`));
    expect(show.stdout).toMatch(new RegExp(`waits for its window .+ UTC \\(opens ${wall(opens, SP)} ${SP}\\)`));
    // The window is kept in UTC (its `--window` is read so), and shown on the reader's clock too.
    const onClock = `${wall(opens, SP).slice(11)}-${wall(opens + 60_000, SP).slice(11)}`;
    expect(show.stdout).toContain(`window ${hhmm(opens)}-${hhmm(opens + 60_000)} UTC (${onClock} ${SP})`);
    expect(show.stdout).not.toMatch(/\d{4}-\d\d-\d\dT\d\d:\d\d/);

    const list = await vqb(['watch', 'list'], env);
    expect(list.stdout).toMatch(new RegExp(`opens ${wall(opens, SP)} ${SP}`));
  }, 60_000);
});

// The file a user writes a `--by 18:00` deadline for (the dry run says when it is due).
describe('--by 18:00 is read on the clock of VQ_TIME_ZONE', () => {
  it('vqb run --dry-run --by 18:00 is due at 18:00 in São Paulo, the process in UTC', async () => {
    const h = await harness.start({ label: 'tz-by', workers: 0 });
    const file = join(h.config.outDir, '..', 'frota.csv');
    await writeFile(file, `placa\r\n${makePlates(3).join('\r\n')}\r\n`);
    const env = harnessEnv(h, { TZ: 'UTC', VQ_TIME_ZONE: SP });
    const dry = await vqb(['run', '--dry-run', '--by', '18:00', file], env);
    expect(dry.code, dry.stderr).toBe(0);
    // Within the hour before it, an instant is written to the second (18:00:00): a CI run at 17:14
    // in São Paulo read so.
    expect(dry.stdout).toMatch(new RegExp(`due \\d{4}-\\d\\d-\\d\\d 18:00(:00)? ${SP} \\(in `));
  }, 60_000);
});

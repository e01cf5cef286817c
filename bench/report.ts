// The tables of one run, each figure with the target it is read against (✓/✗, never asserted):
// vqb beside the naive peer, then vqb's scheduling and per-account pacing alone; printed and
// written to results.json and RESULTS.md with the machine and settings.
import { mkdir, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { AccountPacingRun } from './accounts.js';
import { type ClusterFigures, clusterTables } from './cluster.js';
import type { MachineInfo } from './common.js';
import type { DeadlineResult } from './deadlines.js';
import type { EventLoopFigures } from './event-loop.js';
import type { FinishedFigures } from './finished.js';
import type { DedupFigures, IngestFigures, ReaderFigures } from './ingest.js';
import type { LearnedRun } from './learned.js';
import { type ManyAccountsFigures, manyAccountsTables } from './many-accounts.js';
import type { PoolRun } from './pool.js';
import { type ScaleFigures, scaleTables } from './scale.js';
import type { InteractiveResult, ShareResult } from './scheduling.js';
import type { BatchResult, WindowResult } from './upstream.js';

export interface BenchResults {
  date: string;
  quick: boolean;
  only: string[] | null;
  durationS: number;
  machine: MachineInfo;
  settings: Record<string, unknown>;
  pacing?: { vqb?: WindowResult; peer?: WindowResult };
  overload?: { vqb?: WindowResult; peer?: WindowResult };
  makespan?: { lowerBoundS: number; vqb?: BatchResult; peer?: BatchResult };
  interactive?: InteractiveResult;
  shares?: { equal?: ShareResult; weighted?: ShareResult };
  /** Two accounts served by the same three workers. */
  accounts?: AccountPacingRun;
  /** Four workers on one account. */
  scaleOut?: AccountPacingRun;
  /** One account at a per-minute limit, over a long window. */
  perMinute?: AccountPacingRun;
  /** reader and dedup are absent from runs made before they were measured. */
  ingest?: { vqb: IngestFigures; raw: IngestFigures; reader?: ReaderFigures; dedup?: DedupFigures };
  /** Redis kept per finished plate (absent from runs made before it was measured). */
  finished?: FinishedFigures;
  /** The longest event-loop block during the heaviest work a worker process does (absent from older runs). */
  eventLoop?: EventLoopFigures;
  /** `auto` against limits vqb is not told, beside the same limits configured exactly (absent from older runs). */
  learned?: LearnedRun[];
  /** ETA ranges against real finishes, and three batches with deadlines on one learned key (absent from older runs). */
  deadlines?: DeadlineResult;
  /** Pools of keys (docs/plans.md): three learned keys, one expiring mid-batch. */
  pool?: PoolRun;
  /** The same keys unpooled over the same window (`--only pool-baseline`). */
  poolBaseline?: PoolRun;
  /** Idle cost by account count, and Redis and CPU per plate beside BullMQ by hand (absent from older runs). */
  scale?: ScaleFigures;
  /** 1,000 accounts at once, four processes, one Redis (absent from older runs). */
  many?: ManyAccountsFigures;
  /** The same scenario on one Redis and on a 3-master Redis Cluster, in one run (absent from older runs). */
  cluster?: ClusterFigures;
  /** Each measured run: its wall time and the machine's 1-minute load average at its end. */
  steps: { name: string; seconds: number; load1: number }[];
  errors: string[];
}

interface Row {
  figure: string;
  vqb: string;
  peer: string;
  target: string;
  /** undefined: no target, or nothing measured. */
  met?: boolean;
}

/** A figure of vqb alone (no peer runs these). */
interface VqbRow {
  figure: string;
  value: string;
  target: string;
  met?: boolean;
}

const fixed = (digits: number) => (x: number | undefined) =>
  x === undefined || !Number.isFinite(x) ? '—' : x.toFixed(digits);
const int = (x: number | undefined) =>
  x === undefined || !Number.isFinite(x) ? '—' : Math.round(x).toLocaleString('en');

function row(
  figure: string,
  vqb: number | undefined,
  peer: number | undefined,
  format: (x: number | undefined) => string,
  target?: { text: string; ok: (x: number) => boolean },
): Row {
  return {
    figure,
    vqb: format(vqb),
    peer: format(peer),
    target: target?.text ?? '',
    ...(target && vqb !== undefined && Number.isFinite(vqb) ? { met: target.ok(vqb) } : {}),
  };
}

/** Times the workers held the whole line for the upstream (X-RateLimit-Remaining 0, or a 429). */
function holds(log: Record<string, number> | undefined): number | undefined {
  if (!log) return undefined;
  return Object.entries(log).reduce((sum, [msg, n]) => sum + (/budget used up|asked to wait/.test(msg) ? n : 0), 0);
}

export function tableRows(r: BenchResults, rate: number): Row[] {
  const rows: Row[] = [];
  if (r.pacing) {
    const { vqb, peer } = r.pacing;
    rows.push(
      row(
        'pacing at R: upstream requests/s ÷ R',
        vqb && vqb.requestsPerS / rate,
        peer && peer.requestsPerS / rate,
        fixed(3),
        { text: '≥ 0.97', ok: (x) => x >= 0.97 },
      ),
    );
    rows.push(
      row('pacing at R: 429s received', vqb?.rateLimited, peer?.rateLimited, int, { text: '0', ok: (x) => x === 0 }),
    );
    rows.push(
      row('pacing at R: densest 1 s (requests)', vqb?.maxInWindow, peer?.maxInWindow, int, {
        text: `≤ ${rate}`,
        ok: (x) => x <= rate,
      }),
    );
    rows.push(row('pacing at R: times the line held for the upstream', holds(vqb?.workerLog), undefined, int));
  }
  if (r.overload) {
    const { vqb, peer } = r.overload;
    rows.push(
      row(
        'configured 2R: finished plates/s ÷ R',
        vqb && vqb.finishedPerS / rate,
        peer && peer.finishedPerS / rate,
        fixed(3),
      ),
    );
    rows.push(
      row(
        'configured 2R: upstream requests/s ÷ R',
        vqb && vqb.requestsPerS / rate,
        peer && peer.requestsPerS / rate,
        fixed(3),
      ),
    );
    rows.push(row('configured 2R: 429s received', vqb?.rateLimited, peer?.rateLimited, int));
  }
  if (r.makespan) {
    const { vqb, peer, lowerBoundS } = r.makespan;
    const perPlate = (b: BatchResult | undefined) => b && (b.creates + b.polls) / b.plates;
    rows.push(
      row('requests per plate (creates + polls)', perPlate(vqb), perPlate(peer), fixed(2), {
        text: '≤ 2.2',
        ok: (x) => x <= 2.2,
      }),
    );
    rows.push(
      row(
        `batch makespan ÷ lower bound (${lowerBoundS.toFixed(0)} s)`,
        vqb && vqb.wallS / lowerBoundS,
        peer && peer.wallS / lowerBoundS,
        fixed(3),
        {
          text: '≤ 1.15',
          ok: (x) => x <= 1.15,
        },
      ),
    );
    rows.push(row('batch makespan, s', vqb?.wallS, peer?.wallS, fixed(1)));
    rows.push(row('429s during the batch', vqb?.rateLimited, peer?.rateLimited, int));
    rows.push(row('times the line held for the upstream', holds(vqb?.workerLog), undefined, int));
    rows.push(
      row(
        'worker CPU s per 1,000 plates',
        vqb?.workerCpuS === undefined ? undefined : (vqb.workerCpuS / vqb.plates) * 1000,
        undefined,
        fixed(2),
      ),
    );
  }
  if (r.ingest) {
    const { vqb, raw } = r.ingest;
    rows.push({
      ...row('ingest rows/s (peer column: raw addBulk)', vqb.rowsPerS, raw.rowsPerS, int, {
        text: '≥ 15,000',
        ok: (x) => x >= 15_000,
      }),
    });
    rows.push(
      row('ingest ÷ raw addBulk', vqb.rowsPerS / raw.rowsPerS, undefined, fixed(2), {
        text: '≥ 0.7',
        ok: (x) => x >= 0.7,
      }),
    );
    rows.push(
      row('ingest peak RSS, MB (raw addBulk)', vqb.peakRssMB, raw.peakRssMB, int, {
        text: '≤ 250',
        ok: (x) => x <= 250,
      }),
    );
    const queued = vqb.jobs.toLocaleString('en');
    rows.push(
      row(
        `Redis bytes per queued plate, ${queued} queued (peer column: a BullMQ job each)`,
        vqb.redisBytesPerJob,
        raw.redisBytesPerJob,
        int,
        {
          text: '≤ 600',
          ok: (x) => x <= 600,
        },
      ),
    );
    const parts = vqb.keyBytesPerPlate ?? {};
    for (const part of ['waiting list', 'input rows', 'rest']) {
      if (parts[part] !== undefined)
        rows.push(row(`… of which (MEMORY USAGE) ${part}`, parts[part], undefined, fixed(1)));
    }
    const { reader, dedup } = r.ingest;
    if (reader) {
      const rowsText = reader.rows.toLocaleString('en');
      rows.push(row(`CSV reader alone, ${rowsText} rows: peak RSS, MB`, reader.peakRssMB, undefined, int));
      rows.push(
        row(`CSV reader alone, ${rowsText} rows: RSS added while reading, MB`, reader.addedRssMB, undefined, int, {
          text: '≤ 200',
          ok: (x) => x <= 200,
        }),
      );
    }
    if (dedup) {
      rows.push(
        row(
          `dedup table, ${dedup.plates.toLocaleString('en')} distinct plates: bytes per plate`,
          dedup.bytesPerPlate,
          undefined,
          fixed(1),
          { text: '≤ 60', ok: (x) => x <= 60 },
        ),
      );
    }
  }
  if (r.finished) {
    const f = r.finished;
    rows.push(
      row(
        `Redis bytes per finished plate, ${f.plates.toLocaleString('en')} finished (MEMORY USAGE of the batch's keys)`,
        f.keyBytesTotalPerPlate,
        undefined,
        int,
        {
          text: '≤ 300',
          ok: (x) => x <= 300,
        },
      ),
    );
    rows.push(row('… used_memory after − before, per finished plate', f.redisBytesPerPlate, undefined, int));
    for (const part of ['outcomes', 'input rows', 'rest']) {
      if (f.keyBytesPerPlate[part] !== undefined)
        rows.push(row(`… of which (MEMORY USAGE) ${part}`, f.keyBytesPerPlate[part], undefined, fixed(1)));
    }
    rows.push(
      row(
        'reuse pointer per done plate with reuse off (default; kept VQ_REUSE_KEEP), bytes',
        f.reusePointerBytesPerPlate,
        undefined,
        int,
      ),
    );
    rows.push(row('reuse entry per plate when reuse is on, bytes', f.reuseBytesPerPlate, undefined, int));
  }
  if (r.eventLoop) {
    // A block near VQ_LOCK_DURATION (30 s) would let another worker take this process's jobs.
    const lock = r.eventLoop.lockDurationMs;
    for (const p of r.eventLoop.phases) {
      rows.push(
        row(`longest event-loop block ÷ lock duration: ${p.name}`, p.maxBlockMs / lock, undefined, fixed(4), {
          text: '≤ 0.05',
          ok: (x) => x <= 0.05,
        }),
      );
    }
  }
  return rows;
}

function vqbRow(
  figure: string,
  value: number | undefined,
  format: (x: number | undefined) => string,
  target?: { text: string; ok: (x: number) => boolean },
): VqbRow {
  return {
    figure,
    value: format(value),
    target: target?.text ?? '',
    ...(target && value !== undefined && Number.isFinite(value) ? { met: target.ok(value) } : {}),
  };
}

/** One batch's lowest and highest share over the intervals, read against its expected share ± 0.1. */
function shareRow(figure: string, r: ShareResult, i: 0 | 1): VqbRow {
  const [lo, hi] = [r.min[i], r.max[i]];
  const measured = r.intervals.length > 0;
  const e = r.expected[i];
  return {
    figure,
    value: measured ? `${lo.toFixed(2)}–${hi.toFixed(2)}` : '—',
    target: `${e.toFixed(2)} ± 0.10`,
    ...(measured ? { met: lo >= e - 0.1 - 1e-9 && hi <= e + 0.1 + 1e-9 } : {}),
  };
}

function pacingRows(name: string, run: AccountPacingRun | undefined, min: number): VqbRow[] {
  if (!run) return [];
  const one = run.accounts.length === 1;
  return run.accounts.flatMap((a) => {
    const who = one ? name : `${name}: ${a.id} (${a.rateLimit})`;
    return [
      vqbRow(`${who}: requests/s ÷ limit`, a.ofLimit, fixed(3), { text: `≥ ${min}`, ok: (x) => x >= min }),
      vqbRow(`${who}: 429s`, a.rateLimited, int, { text: '0', ok: (x) => x === 0 }),
    ];
  });
}

export function vqbRows(r: BenchResults): VqbRow[] {
  const rows: VqbRow[] = [];
  if (r.interactive) {
    const { interactive: i, normal: n, bulkPlates, rateLimited } = r.interactive;
    const under = `under a ${bulkPlates.toLocaleString('en')}-plate normal batch`;
    rows.push(
      vqbRow(
        `interactive 1-plate batch ${under}: submit → result stored, s (median of ${i.samples})`,
        i.medianLatencyS,
        fixed(2),
      ),
    );
    rows.push(vqbRow('… the upstream completion time of its query, s (median)', i.medianCompletionS, fixed(2)));
    rows.push(
      vqbRow('… result stored − upstream completion time, s (worst)', i.worstExcessS, fixed(2), {
        text: '≤ 2',
        ok: (x) => x <= 2,
      }),
    );
    rows.push(vqbRow('… of which submit → create at the upstream, s (worst)', i.worstToCreateS, fixed(2)));
    rows.push(vqbRow('… of which upstream completed → result stored, s (worst)', i.worstAfterCompletionS, fixed(2)));
    rows.push(
      vqbRow("… the large batch's creates between its submit and its create (worst)", i.worstBulkCreatesBefore, int),
    );
    rows.push(
      vqbRow(
        `normal 1-plate batch submitted at the same moment: submit → result stored, s (median of ${n.samples})`,
        n.medianLatencyS,
        fixed(2),
      ),
    );
    rows.push(vqbRow('… result stored − upstream completion time, s (worst)', n.worstExcessS, fixed(2)));
    rows.push(vqbRow('… of which submit → create at the upstream, s (worst)', n.worstToCreateS, fixed(2)));
    rows.push(
      vqbRow(
        "… the large batch's creates between its submit and its create (worst; a fair share: about 1)",
        n.worstBulkCreatesBefore,
        int,
      ),
    );
    rows.push(vqbRow('429s during the interactive run', rateLimited, int, { text: '0', ok: (x) => x === 0 }));
  }
  for (const [name, res] of [
    ['equal weights', r.shares?.equal],
    ['weights 3:1', r.shares?.weighted],
  ] as const) {
    if (!res) continue;
    const every = `share of the creates in each ${res.intervalS.toFixed(0)} s interval while both wait (${res.intervals.length})`;
    rows.push(
      shareRow(
        `${name}, second batch ${res.offsetS.toFixed(0)} s later: first batch's (weight ${res.weights[0]}) ${every}, min–max`,
        res,
        0,
      ),
    );
    rows.push(shareRow(`${name}: second batch's (weight ${res.weights[1]}) ${every}, min–max`, res, 1));
    rows.push(vqbRow(`${name}: second batch's submit → its first create, s`, res.secondFirstCreateS, fixed(2)));
  }
  rows.push(...pacingRows(`two accounts, ${r.accounts?.workers ?? 3} workers`, r.accounts, 0.97));
  rows.push(
    ...pacingRows(
      `${r.scaleOut?.workers ?? 4} workers, one account at ${r.scaleOut?.accounts[0]?.rateLimit ?? ''}`,
      r.scaleOut,
      0.97,
    ),
  );
  for (const run of r.learned ?? []) {
    // From minute 2 on (the first is learning): the share of the real limit and the 429s, per minute.
    const settled = run.sharePerMinute.slice(run.minutes > 1 ? 1 : 0);
    const limits = run.rateLimitedPerMinute.slice(run.minutes > 1 ? 1 : 0);
    // Announced, or configured exactly: the exact pacing's 0.97. Learned from 429s (auto, or configured above the limit): 0.9.
    const target = run.headers || run.configured === run.limit ? 0.97 : 0.9;
    rows.push(
      vqbRow(
        `learned: ${run.name}: share of the real limit per minute (${run.sharePerMinute.map((x) => x.toFixed(2)).join(', ')}), lowest after the first`,
        Math.min(...settled),
        fixed(3),
        {
          text: `≥ ${target}`,
          ok: (x) => x >= target,
        },
      ),
      vqbRow(
        `learned: ${run.name}: 429s per minute (${run.rateLimitedPerMinute.join(', ')}), most after the first`,
        Math.max(...limits),
        int,
        { text: '≤ 5', ok: (x) => x <= 5 },
      ),
      vqbRow(`learned: ${run.name}: s to ≥ 0.9 of the limit`, run.convergeS, int),
    );
  }
  rows.push(...deadlineRows(r.deadlines));
  const pool = r.pool;
  if (pool) {
    rows.push(
      vqbRow(
        'pool of keys at 10, 20 and 30/s (learned): requests/s ÷ 60/s while all three serve',
        pool.allOfSum,
        fixed(3),
        {
          text: '≥ 0.95',
          ok: (x) => x >= 0.95,
        },
      ),
      vqbRow('pool: the 30/s key expired: the other two from 1 s after, requests/s ÷ 30/s', pool.afterOfSum, fixed(3), {
        text: '≥ 0.95',
        ok: (x) => x >= 0.95,
      }),
      vqbRow(
        "pool: ms until the expired key's plates not created left it (queued or waiting in a worker)",
        pool.movedMs,
        int,
        { text: '≤ 1,000', ok: (x) => x <= 1_000 },
      ),
      vqbRow(`pool: creates at the simulator − plates (${pool.plates})`, pool.creates - pool.plates, int, {
        text: '0',
        ok: (x) => x === 0,
      }),
      vqbRow('pool: plates created twice', pool.duplicateCreates, int, { text: '0', ok: (x) => x === 0 }),
      vqbRow('pool: the batch finished (1 = yes)', pool.finished ? 1 : 0, int, { text: '1', ok: (x) => x === 1 }),
    );
  }
  if (r.poolBaseline)
    rows.push(
      vqbRow(
        'pool baseline: the same three keys unpooled, a batch each: requests/s ÷ 60/s',
        r.poolBaseline.allOfSum,
        fixed(3),
      ),
    );
  const minute = r.perMinute?.accounts[0];
  rows.push(
    ...pacingRows(
      `one account at ${minute?.rateLimit ?? ''}, ${(r.perMinute?.seconds ?? 0).toFixed(0)} s of steady load`,
      r.perMinute,
      0.99,
    ),
  );
  return rows;
}

const mark = (r: { met?: boolean }) => (r.met === undefined ? '' : r.met ? ' ✓' : ' ✗');

function textTable(head: string[], cells: string[][]): string {
  const widths = head.map((h, i) => Math.max(h.length, ...cells.map((c) => c[i]!.length)));
  const line = (c: string[]) => c.map((x, i) => (i === 0 ? x.padEnd(widths[i]!) : x.padStart(widths[i]!))).join('  ');
  return [line(head), widths.map((w) => '-'.repeat(w)).join('  '), ...cells.map(line)].join('\n');
}

export function formatTable(rows: Row[]): string {
  return textTable(
    ['figure', 'vqb', 'peer', 'target'],
    rows.map((r) => [r.figure, r.vqb, r.peer, `${r.target}${mark(r)}`]),
  );
}

export function formatVqbTable(rows: VqbRow[]): string {
  return textTable(
    ['figure', 'vqb', 'target'],
    rows.map((r) => [r.figure, r.value, `${r.target}${mark(r)}`]),
  );
}

function markdownTable(rows: Row[]): string {
  return [
    '| figure | vqb | peer | target |',
    '|---|---:|---:|---|',
    ...rows.map((r) => `| ${r.figure} | ${r.vqb} | ${r.peer} | ${r.target}${mark(r)} |`),
  ].join('\n');
}

function markdownVqbTable(rows: VqbRow[]): string {
  return [
    '| figure | vqb | target |',
    '|---|---:|---|',
    ...rows.map((r) => `| ${r.figure} | ${r.value} | ${r.target}${mark(r)} |`),
  ].join('\n');
}

export const METHOD = `## How each figure is measured

- **Processes.** The upstream simulator runs as \`vqb simulate\` in a child process (sliding window of
  R requests/s per key, completion uniform in [2 s, 6 s]); its \`GET /__stats\` is the source of every
  request count, and \`POST /__admin/reset\` clears stats and limiter state before each run. vqb's
  workers run as \`vqb work\` child processes configured by environment (as in production: each
  account's requests spaced (window + VQ_PACING_JITTER) ÷ limit apart on one schedule in Redis,
  VQ_CONCURRENCY 8, adaptive first poll, info-level logs); the bench process only enqueues through
  the library API (\`createVqb().enqueue\`) and reads batches and outcomes back. The peer
  (\`bench/peer.ts\`) runs in a child process too. Every vqb run uses a fresh \`{vqbbench-…}\` prefix
  (so the poll learner starts cold each run) that is deleted afterwards.
- **Pacing at R.** A backlog larger than the window can drain is enqueued; the window opens a few
  seconds after the simulator sees the first request and lasts the configured length. Requests/s =
  counted requests (not 429s) in the window ÷ its length, divided by R. 429s are counted over the
  whole run. "Densest 1 s" is the simulator's largest count of accepted requests in any 1 s interval.
- **Configured at 2R.** Same, with vqb at VQ_RATE_LIMIT=2R/s and the peer's cap at 2R against the
  R/s upstream. Finished plates/s counts plates that reached an outcome within the window (ideal
  at 2 requests per plate: 0.5 R).
- **Requests per plate, makespan, worker CPU.** One batch of N plates at R, from the enqueue call
  (workers idle and ready) to the batch's \`finishedAt\` (peer: from its start to its last outcome).
  Requests per plate = (creates + successful GETs) ÷ N from the simulator. Lower bound =
  2N ÷ R + 6 s (the slowest completion). Worker CPU = user + system CPU of the \`vqb work\` process
  (from \`/proc/<pid>/stat\`) between the enqueue and the end of the batch, so the simulator's and
  the orchestrator's share are outside it by construction.
- **Interactive under bulk load.** One worker process, one account at R (the simulator above). A
  5,000-plate \`normal\` batch is enqueued; some seconds after its first request (15 s in the full
  run), while thousands of its creates wait, a 1-plate \`interactive\` batch and a 1-plate
  \`normal\` batch are submitted at the same moment; once both are stored, the next pair follows
  (5 pairs; the large batch is never finished, its keys are deleted). Each plate's latency is
  submit (just before \`enqueue\`) → its outcome's \`finishedAt\`; the upstream completion time is
  the simulator's \`completedAt − createdAt\` for that query, read from the stored result, and
  the target is latency ≤ completion + 2 s (issue 12; the old single line took 98.7 s behind a
  1,000-plate batch). "Submit → create" uses the simulator's \`createdAt\` (one pacing interval
  at R is (1,000 + 25) ÷ 20 ≈ 51 ms); "completed → stored" is poll timing plus recording.
- **Shares.** One worker process, one account at R. A first \`normal\` batch is enqueued, a second
  30 s later (10 s in quick runs) while the first still has creates waiting; both run to the end.
  From the outcomes' \`createdAt\` (ours: when the create's answer arrived), the time from the
  second batch's submit to the last create of whichever batch ran out of creates first is cut into
  whole 30 s intervals (10 s quick); each batch's share of an interval is its creates ÷ both
  batches' creates in it; the table shows each batch's lowest and highest share, read against
  weight ÷ sum of weights ± 0.1. Batch sizes follow from about R ÷ 2 creates a second so that both
  still wait after three intervals (two quick). Run once with weights 1:1, once 3:1 (the first
  batch weight 3).
- **Per-account pacing.** Each run starts a simulator of its own from a \`--config\` file: one key per
  account with its own limit (sliding window, the same completion times), labelled with the account
  id so \`/__stats\` counts each key apart (\`byKey\`). vqb gets the same accounts (a
  VQ_ACCOUNTS_FILE; a single \`default\` account from the environment) and every account a backlog
  larger than the run can drain. The window opens a few seconds after every key sent its first
  request; requests/s ÷ limit = the key's counted requests in the window ÷ its length ÷ the limit
  per second; 429s are the key's over the whole run. Runs: two accounts at 10/s and 20/s served by
  the same three \`vqb work\` processes (60 s window); four processes on one account at 20/s (60 s);
  one process on one account at 300/min (150 s of steady load; 30 s quick). The pacing interval
  alone caps the first two at 1,000 ÷ 1,025 = 0.976 of the limit and the third at
  60,000 ÷ 60,025 = 0.9996.
- **Ingest.** A CSV (\`placa;cliente\`, CRLF, distinct valid Mercosul plates) generated to a temp file;
  a child process runs \`readPlateCsv(createReadStream(file))\` + \`ingest()\` into one batch (no
  workers), another child runs BullMQ \`queue.addBulk\` of the same jobs (same data and job options,
  chunks of 1,000). Rows/s excludes process start and the Redis connection. Peak RSS is the child's
  \`getrusage\` maxRSS (a 20 ms \`memoryUsage().rss\` sampler agrees, see results.json). Redis bytes per
  plate = \`INFO memory\` used_memory after − before, ÷ plates queued (for vqb: the batch's stored
  input rows, the scheduler's waiting list and the few jobs the feeder made; no worker runs, so
  every plate stays queued); the Redis server is shared, so other clients' writes during the step
  would show here. The "of which" rows are \`MEMORY USAGE … SAMPLES 0\` of the prefix's keys,
  grouped, ÷ plates: they do not depend on other clients, and leave out allocator overhead. Each
  prefix is deleted, and lazy freeing awaited, before the next step.
- **CSV reader alone.** Another child reads the same file with \`readPlateCsv\` and drops each row
  (no dedup, no Redis). Peak RSS is its \`getrusage\` maxRSS; "added" subtracts the RSS just before
  reading began (module loading).
- **Dedup table.** Another child feeds the \`PlateDeduper\` ingest uses as many distinct plates as
  the CSV has rows, generated on the fly; bytes per plate = (\`heapUsed + arrayBuffers\` after two
  forced collections − the same before) ÷ distinct plates, so only what the table keeps counts.
`;

function command(r: BenchResults): string {
  const flags = [...(r.quick ? ['--quick'] : []), ...(r.only ? ['--only', r.only.join(',')] : [])];
  return flags.length === 0 ? 'npm run bench' : `npm run bench -- ${flags.join(' ')}`;
}

/** What vqb's workers logged in each run: the evidence behind a pacing figure. */
function workerLogSection(r: BenchResults): string {
  const runs: [string, Record<string, number> | undefined][] = [
    ['pacing at R', r.pacing?.vqb?.workerLog],
    ['configured at 2R', r.overload?.vqb?.workerLog],
    ['batch', r.makespan?.vqb?.workerLog],
    ['interactive under bulk load', r.interactive?.workerLog],
    ['shares, equal weights', r.shares?.equal?.workerLog],
    ['shares, weights 3:1', r.shares?.weighted?.workerLog],
    ['two accounts', r.accounts?.workerLog],
    ['four workers', r.scaleOut?.workerLog],
    ['per-minute limit', r.perMinute?.workerLog],
  ];
  const lines = runs
    .filter((x): x is [string, Record<string, number>] => x[1] !== undefined)
    .map(
      ([name, log]) =>
        `- ${name}: ${
          Object.entries(log)
            .map(([msg, n]) => `${n} × "${msg}"`)
            .join('; ') || 'nothing at info or above'
        }`,
    );
  return lines.length === 0
    ? ''
    : `**vqb worker log lines per run** (numbers in messages shown as N):\n\n${lines.join('\n')}\n`;
}

/** How long each run took, and how busy the machine was: the bench's own processes count in the load too. */
function stepsSection(r: BenchResults): string {
  if (!r.steps?.length) return '';
  const lines = r.steps.map((s) => `- ${s.name}: ${s.seconds.toFixed(0)} s, load ${s.load1.toFixed(2)}`);
  return `**Runs** (wall time; 1-minute load average at the end, on ${r.machine.cores} cores, the bench's own processes included):\n\n${lines.join('\n')}\n`;
}

export async function writeResults(
  results: BenchResults,
  rate: number,
  jsonPath: string,
  mdPath: string,
): Promise<string> {
  const rows = tableRows(results, rate);
  const own = vqbRows(results);
  const scale = results.scale ? scaleTables(results.scale) : undefined;
  const many = results.many ? manyAccountsTables(results.many) : undefined;
  const cluster = results.cluster ? clusterTables(results.cluster) : undefined;
  const table = [
    rows.length > 0 ? formatTable(rows) : '',
    own.length > 0 ? formatVqbTable(own) : '',
    scale?.text ?? '',
    many?.text ?? '',
    cluster?.text ?? '',
  ]
    .filter(Boolean)
    .join('\n\n');
  await mkdir(dirname(jsonPath), { recursive: true });
  await writeFile(jsonPath, `${JSON.stringify({ ...results, table: rows, vqbTable: own }, null, 2)}\n`);
  const m = results.machine;
  const md = [
    '# vqb benchmarks',
    '',
    `Generated by \`${command(results)}\` on ${results.date} in ${Math.round(results.durationS)} s. Figures are ratios from this one run; they are never asserted in tests. Every figure: \`results.json\` beside this file.`,
    '',
    `**Machine:** ${m.cpuModel}, ${m.cores} cores, ${m.memoryGiB} GiB; Node ${m.node}; Redis ${m.redis}; ${m.platform}.`,
    '',
    ...(rows.length > 0 ? ['## vqb and a naive peer under the same upstream', '', markdownTable(rows), ''] : []),
    ...(own.length > 0 ? ['## Scheduling and per-account pacing (vqb alone)', '', markdownVqbTable(own), ''] : []),
    ...(scale ? [scale.markdown] : []),
    ...(many ? [many.markdown] : []),
    ...(cluster ? [cluster.markdown] : []),
    workerLogSection(results),
    stepsSection(results),
    results.errors.length > 0 ? `**Steps that failed:**\n\n${results.errors.map((e) => `- ${e}`).join('\n')}\n` : '',
    '## Settings',
    '',
    '```json',
    JSON.stringify(results.settings, null, 2),
    '```',
    '',
    METHOD,
  ].join('\n');
  await writeFile(mdPath, md);
  return table;
}

/** Deadlines (docs/plans.md): the dry run's ETA range against the real finish, and earliest deadline first. */
function deadlineRows(d: DeadlineResult | undefined): VqbRow[] {
  if (!d) return [];
  const fmt = (x: number) => (Number.isFinite(x) ? x.toFixed(1) : 'not finished');
  const rows = [
    vqbRow(
      `deadlines: dry-run ETA range holds the real finish (${d.eta.length} runs of ${d.eta[0]?.plates ?? 0} plates, one learned key)`,
      d.eta.length > 0 ? d.etaContained / d.eta.length : undefined,
      fixed(2),
      { text: '≥ 0.9', ok: (x) => x >= 0.9 },
    ),
  ];
  for (const b of d.batches) {
    // The infeasible batch is not waited for (the run ends when the feasible ones have): no ratio.
    const finish =
      Number.isFinite(b.withDeadlinesS) || Number.isFinite(b.byWeightS)
        ? `finished after ${fmt(b.withDeadlinesS)} s with deadlines, ${fmt(b.byWeightS)} s by equal weights; s with deadlines ÷ deadline`
        : 'not waited for (the run ends when the feasible ones have)';
    rows.push(
      vqbRow(
        `deadlines: ${b.name} (${b.plates} plates, due in ${b.withinS} s) said "${b.feasibility}" at enqueue; ${finish}`,
        b.feasibility === 'feasible' ? b.withDeadlinesS / b.withinS : undefined,
        fixed(2),
        b.feasibility === 'feasible' ? { text: '≤ 1', ok: (x) => x <= 1 } : undefined,
      ),
    );
  }
  rows.push(
    vqbRow(
      'deadlines: the infeasible batch said not feasible at enqueue (1: yes)',
      d.batches[0]?.feasibility === 'not feasible' ? 1 : 0,
      int,
      {
        text: '1',
        ok: (x) => x === 1,
      },
    ),
    vqbRow(
      `deadlines: feasible batches in time with deadlines less by equal weights alone (${d.inTimeWithDeadlines} of ${d.feasible}; ${d.inTimeByWeight} of ${d.feasible})`,
      d.inTimeWithDeadlines - d.inTimeByWeight,
      int,
      { text: '≥ 1', ok: (x) => x >= 1 },
    ),
    vqbRow('deadlines: 429s during both runs', d.rateLimited, int, { text: '0', ok: (x) => x === 0 }),
  );
  return rows;
}

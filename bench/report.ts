// One table from one run: each figure for vqb and the peer, the target it is read against (✓/✗,
// never asserted), printed and written to results.json and RESULTS.md with the machine and settings.
import { writeFile, mkdir } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { MachineInfo } from './common.js';
import type { DedupFigures, IngestFigures, ReaderFigures } from './ingest.js';
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
  /** reader and dedup are absent from runs made before they were measured. */
  ingest?: { vqb: IngestFigures; raw: IngestFigures; reader?: ReaderFigures; dedup?: DedupFigures };
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

const fixed = (digits: number) => (x: number | undefined) => (x === undefined || !Number.isFinite(x) ? '—' : x.toFixed(digits));
const int = (x: number | undefined) => (x === undefined || !Number.isFinite(x) ? '—' : Math.round(x).toLocaleString('en'));

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
    rows.push(row('pacing at R: upstream requests/s ÷ R', vqb && vqb.requestsPerS / rate, peer && peer.requestsPerS / rate, fixed(3), { text: '≥ 0.97', ok: (x) => x >= 0.97 }));
    rows.push(row('pacing at R: 429s received', vqb?.rateLimited, peer?.rateLimited, int, { text: '0', ok: (x) => x === 0 }));
    rows.push(row('pacing at R: densest 1 s (requests)', vqb?.maxInWindow, peer?.maxInWindow, int, { text: `≤ ${rate}`, ok: (x) => x <= rate }));
    rows.push(row('pacing at R: times the line held for the upstream', holds(vqb?.workerLog), undefined, int));
  }
  if (r.overload) {
    const { vqb, peer } = r.overload;
    rows.push(row('configured 2R: finished plates/s ÷ R', vqb && vqb.finishedPerS / rate, peer && peer.finishedPerS / rate, fixed(3)));
    rows.push(row('configured 2R: upstream requests/s ÷ R', vqb && vqb.requestsPerS / rate, peer && peer.requestsPerS / rate, fixed(3)));
    rows.push(row('configured 2R: 429s received', vqb?.rateLimited, peer?.rateLimited, int));
  }
  if (r.makespan) {
    const { vqb, peer, lowerBoundS } = r.makespan;
    const perPlate = (b: BatchResult | undefined) => b && (b.creates + b.polls) / b.plates;
    rows.push(row('requests per plate (creates + polls)', perPlate(vqb), perPlate(peer), fixed(2), { text: '≤ 2.2', ok: (x) => x <= 2.2 }));
    rows.push(
      row(`batch makespan ÷ lower bound (${lowerBoundS.toFixed(0)} s)`, vqb && vqb.wallS / lowerBoundS, peer && peer.wallS / lowerBoundS, fixed(3), {
        text: '≤ 1.15',
        ok: (x) => x <= 1.15,
      }),
    );
    rows.push(row('batch makespan, s', vqb?.wallS, peer?.wallS, fixed(1)));
    rows.push(row('429s during the batch', vqb?.rateLimited, peer?.rateLimited, int));
    rows.push(row('times the line held for the upstream', holds(vqb?.workerLog), undefined, int));
    rows.push(row('worker CPU s per 1,000 plates', vqb?.workerCpuS === undefined ? undefined : (vqb.workerCpuS / vqb.plates) * 1000, undefined, fixed(2)));
  }
  if (r.ingest) {
    const { vqb, raw } = r.ingest;
    rows.push({ ...row('ingest rows/s (peer column: raw addBulk)', vqb.rowsPerS, raw.rowsPerS, int, { text: '≥ 15,000', ok: (x) => x >= 15_000 }) });
    rows.push(row('ingest ÷ raw addBulk', vqb.rowsPerS / raw.rowsPerS, undefined, fixed(2), { text: '≥ 0.7', ok: (x) => x >= 0.7 }));
    rows.push(row('ingest peak RSS, MB (raw addBulk)', vqb.peakRssMB, raw.peakRssMB, int, { text: '≤ 250', ok: (x) => x <= 250 }));
    rows.push(row('Redis bytes per queued plate (raw job)', vqb.redisBytesPerJob, raw.redisBytesPerJob, int));
    const { reader, dedup } = r.ingest;
    if (reader) {
      const rowsText = reader.rows.toLocaleString('en');
      rows.push(row(`CSV reader alone, ${rowsText} rows: peak RSS, MB`, reader.peakRssMB, undefined, int));
      rows.push(row(`CSV reader alone, ${rowsText} rows: RSS added while reading, MB`, reader.addedRssMB, undefined, int, { text: '≤ 200', ok: (x) => x <= 200 }));
    }
    if (dedup) {
      rows.push(
        row(`dedup table, ${dedup.plates.toLocaleString('en')} distinct plates: bytes per plate`, dedup.bytesPerPlate, undefined, fixed(1), { text: '≤ 60', ok: (x) => x <= 60 }),
      );
    }
  }
  return rows;
}

const mark = (r: Row) => (r.met === undefined ? '' : r.met ? ' ✓' : ' ✗');

export function formatTable(rows: Row[]): string {
  const cells = rows.map((r) => [r.figure, r.vqb, r.peer, `${r.target}${mark(r)}`]);
  const head = ['figure', 'vqb', 'peer', 'target'];
  const widths = head.map((h, i) => Math.max(h.length, ...cells.map((c) => c[i]!.length)));
  const line = (c: string[]) => c.map((x, i) => (i === 0 ? x.padEnd(widths[i]!) : x.padStart(widths[i]!))).join('  ');
  return [line(head), widths.map((w) => '-'.repeat(w)).join('  '), ...cells.map(line)].join('\n');
}

function markdownTable(rows: Row[]): string {
  return ['| figure | vqb | peer | target |', '|---|---:|---:|---|', ...rows.map((r) => `| ${r.figure} | ${r.vqb} | ${r.peer} | ${r.target}${mark(r)} |`)].join('\n');
}

export const METHOD = `## How each figure is measured

- **Processes.** The upstream simulator runs as \`vqb simulate\` in a child process (sliding window of
  R requests/s per key, completion uniform in [2 s, 6 s]); its \`GET /__stats\` is the source of every
  request count, and \`POST /__admin/reset\` clears stats and limiter state before each run. vqb's
  workers run as \`vqb work\` in a child process configured by environment (as in production: default
  smooth pacing, VQ_CONCURRENCY 8, adaptive first poll, info-level logs); the bench process only
  enqueues through the library API (\`createVqb().enqueue\`) and watches the batch. The peer
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
- **Ingest.** A CSV (\`placa;cliente\`, CRLF, distinct valid Mercosul plates) generated to a temp file;
  a child process runs \`readPlateCsv(createReadStream(file))\` + \`ingest()\` into one batch (no
  workers), another child runs BullMQ \`queue.addBulk\` of the same jobs (same data and job options,
  chunks of 1,000). Rows/s excludes process start and the Redis connection. Peak RSS is the child's
  \`getrusage\` maxRSS (a 20 ms \`memoryUsage().rss\` sampler agrees, see results.json). Redis bytes per
  plate = \`INFO memory\` used_memory after − before, ÷ jobs enqueued (includes the batch's stored input
  rows for vqb); the Redis server is shared, so other clients' writes during the step would show
  here. Each prefix is deleted, and lazy freeing awaited, before the next step.
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
  return lines.length === 0 ? '' : `**vqb worker log lines per run** (numbers in messages shown as N):\n\n${lines.join('\n')}\n`;
}

export async function writeResults(results: BenchResults, rate: number, jsonPath: string, mdPath: string): Promise<string> {
  const rows = tableRows(results, rate);
  const table = formatTable(rows);
  await mkdir(dirname(jsonPath), { recursive: true });
  await writeFile(jsonPath, `${JSON.stringify({ ...results, table: rows }, null, 2)}\n`);
  const m = results.machine;
  const md = [
    '# vqb benchmarks',
    '',
    `Generated by \`${command(results)}\` on ${results.date} in ${Math.round(results.durationS)} s. Figures are ratios from this one run; they are never asserted in tests. Every figure: \`results.json\` beside this file.`,
    '',
    `**Machine:** ${m.cpuModel}, ${m.cores} cores, ${m.memoryGiB} GiB; Node ${m.node}; Redis ${m.redis}; ${m.platform}.`,
    '',
    markdownTable(rows),
    '',
    workerLogSection(results),
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

// One Redis and a 3-master Redis Cluster under the same load (issue 21: "how many accounts and
// plates/s one Redis and one Cluster carry"): the many-accounts scenario (bench/many-accounts.ts)
// run twice in one step, first on a redis-server of its own, then on a cluster of its own
// (src/redis/server.ts), each master read directly. What a master costs per plate and its share of
// the commands give the plates/s each setup would carry before its busiest master fills a core.
import { Redis } from 'ioredis';
import { startThrowawayCluster } from '../src/redis/server.js';
import {
  type ManyAccountsFigures,
  type ManyAccountsSettings,
  type ManyRedis,
  type MasterFigures,
  manyAccountsSettings,
  manyNotes,
  manyRows,
  manyTitle,
  runManyAccounts,
  singleRedis,
} from './many-accounts.js';
import { markdown, Probe, text } from './scale.js';
import type { StepContext } from './upstream.js';

export interface ClusterSettings extends ManyAccountsSettings {
  masters: number;
}

export function clusterSettings(quick: boolean): ClusterSettings {
  // The many step's scenario as it is, 1,000 accounts (100 with --quick). A run's wall time is set
  // by the keys' limit (an account's 6 plates take about 12 requests at 12/min, a minute and more),
  // not by the number of accounts, so 1,000 cost about the time 300 would (both runs together took
  // 220-271 s on the bench machine) and load Redis three times as much: its fixed per-second costs
  // weigh less in the estimate, and the one-Redis column is the many step's own.
  return { ...manyAccountsSettings(quick), masters: 3 };
}

export interface ClusterRun {
  figures: ManyAccountsFigures;
  masters: MasterFigures[];
}

export interface ClusterFigures {
  settings: ClusterSettings;
  single: ClusterRun;
  cluster: ClusterRun;
  /**
   * Plates/s each setup would carry before its busiest master used a whole core: 1 s ÷ that
   * master's CPU per plate (= the run's plates/s ÷ the share of a core it used). `ratio`: cluster ÷ single.
   */
  capacity: { singlePlatesPerS: number; clusterPlatesPerS: number; ratio: number };
}

const round = (x: number, digits: number) => Math.round(x * 10 ** digits) / 10 ** digits;

/** A throwaway cluster of `masters` as the scenario's Redis: the workers get every master as a seed. */
async function clusterRedis(masters: number): Promise<ManyRedis> {
  const cluster = await startThrowawayCluster(masters);
  const probes = cluster.nodes.map(
    (n) => new Probe(new Redis(n.port, '127.0.0.1', { maxRetriesPerRequest: 2, connectionName: 'vqb-bench-cluster' })),
  );
  try {
    // The slot map stays as `create` made it (nothing reshards during the step): read it once.
    probes[0]!.count('cluster|slots');
    const ranges = (await probes[0]!.redis.call('CLUSTER', 'SLOTS')) as [number, number, [string, number, string]][];
    const indexOf = (port: number) => cluster.nodes.findIndex((n) => n.port === port);
    const hashSlots = cluster.nodes.map(() => 0);
    for (const [from, to, [, port]] of ranges) hashSlots[indexOf(port)]! += to - from + 1;
    const ownerOfSlot = (slot: number) => {
      const range = ranges.find(([from, to]) => slot >= from && slot <= to);
      if (!range) throw new Error(`no master holds slot ${slot}`);
      return indexOf(range[2][1]);
    };
    return {
      env: { REDIS_URL: cluster.url, VQ_REDIS_MODE: 'cluster' },
      label: `a ${masters}-master Redis Cluster of its own (ports ${cluster.nodes.map((n) => n.port).join(', ')})`,
      probes,
      hashSlots,
      async ownersOf(tags) {
        // Asked of Redis rather than computed here: the slot is whatever CLUSTER KEYSLOT says.
        const pipeline = probes[0]!.redis.pipeline();
        for (const tag of tags) pipeline.call('CLUSTER', 'KEYSLOT', tag);
        probes[0]!.count('cluster|keyslot', tags.length);
        const replies = (await pipeline.exec()) ?? [];
        return replies.map(([err, slot]) => {
          if (err) throw err;
          return ownerOfSlot(Number(slot));
        });
      },
      async close() {
        for (const p of probes) p.redis.disconnect();
        await cluster.close();
      },
    };
  } catch (err) {
    for (const p of probes) p.redis.disconnect();
    await cluster.close();
    throw err;
  }
}

/** 1 s ÷ the busiest master's Redis CPU per plate. */
function capacityOf(run: ClusterRun): number {
  return 1000 / Math.max(...run.masters.map((m) => m.cpuMsPerPlate));
}

export async function measureCluster(ctx: StepContext, s: ClusterSettings): Promise<ClusterFigures> {
  ctx.log('    one Redis:');
  const single = await runManyAccounts(ctx, s, await singleRedis());
  ctx.log(`    a ${s.masters}-master cluster:`);
  const cluster = await runManyAccounts(ctx, s, await clusterRedis(s.masters));
  const singlePlatesPerS = capacityOf(single);
  const clusterPlatesPerS = capacityOf(cluster);
  ctx.log(
    `    cluster: commands per master ${cluster.masters.map((m) => `${(m.commandShare * 100).toFixed(0)} %`).join(' / ')}, ` +
      `CPU ${cluster.masters.map((m) => `${m.cpuPercent} %`).join(' / ')}; capacity ${clusterPlatesPerS.toFixed(0)} vs ${singlePlatesPerS.toFixed(0)} plates/s`,
  );
  return {
    settings: single.figures.settings.workerEnv ? { ...s, workerEnv: single.figures.settings.workerEnv } : s,
    single,
    cluster,
    capacity: {
      singlePlatesPerS: round(singlePlatesPerS, 0),
      clusterPlatesPerS: round(clusterPlatesPerS, 0),
      ratio: round(clusterPlatesPerS / singlePlatesPerS, 2),
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Tables

const busiest = (run: ClusterRun) => run.masters.reduce((x, y) => (y.cpuMsPerPlate > x.cpuMsPerPlate ? y : x));

/** The many step's rows of both runs side by side (matched by figure), then what the cluster adds. */
function sideBySide(f: ClusterFigures): string[][] {
  const single = manyRows(f.single.figures);
  const cluster = new Map(manyRows(f.cluster.figures).map(([figure, measured]) => [figure!, measured!]));
  const out = single.map(([figure, measured, target]) => {
    const c = cluster.get(figure!) ?? '—';
    cluster.delete(figure!);
    return [figure!, measured!, c, target!];
  });
  // A row only one run has (the interactive plate's, when one of them did not store it).
  for (const [figure, measured] of cluster) out.push([figure, '—', measured, '']);
  const b1 = busiest(f.single);
  const b3 = busiest(f.cluster);
  out.push(
    [
      'Redis CPU, % of a core: all masters; the busiest',
      `${f.single.figures.redis.cpuPercent.toFixed(1)}; ${b1.cpuPercent.toFixed(1)}`,
      `${f.cluster.figures.redis.cpuPercent.toFixed(1)}; ${b3.cpuPercent.toFixed(1)}`,
      '',
    ],
    [
      'Redis CPU ms per plate: all masters; the busiest',
      `${sum(f.single.masters.map((m) => m.cpuMsPerPlate)).toFixed(2)}; ${b1.cpuMsPerPlate.toFixed(2)}`,
      `${sum(f.cluster.masters.map((m) => m.cpuMsPerPlate)).toFixed(2)}; ${b3.cpuMsPerPlate.toFixed(2)}`,
      '',
    ],
    [
      'capacity estimate: plates/s before the busiest master fills a core (1 s ÷ its CPU per plate)',
      f.capacity.singlePlatesPerS.toLocaleString('en'),
      `${f.capacity.clusterPlatesPerS.toLocaleString('en')} (× ${f.capacity.ratio.toFixed(2)})`,
      '',
    ],
  );
  return out;
}

const sum = (xs: number[]) => xs.reduce((x, y) => x + y, 0);

function masterRows(f: ClusterFigures): string[][] {
  const accounts = f.settings.accounts;
  return f.cluster.masters.map((m, i) => [
    `master ${i + 1} (:${m.port})${m.globalSlot ? ', the prefix’s slot' : ''}`,
    (m.hashSlots ?? 0).toLocaleString('en'),
    `${m.accounts} (${((m.accounts / accounts) * 100).toFixed(0)} %)`,
    `${m.commandsPerS.toLocaleString('en')} (${(m.commandShare * 100).toFixed(0)} %)`,
    m.peakCommandsPerS.toLocaleString('en'),
    m.cpuPercent.toFixed(1),
    m.cpuMsPerPlate.toFixed(2),
    `${m.clientsBefore} / ${m.peakClients} / ${m.clientsAtEnd}`,
  ]);
}

const SIDE_HEAD = ['figure', 'one Redis', 'cluster', 'target'];
const MASTER_HEAD = [
  'master',
  'hash slots',
  "accounts' slots",
  'commands/s (share)',
  'densest 1 s',
  'CPU % of a core',
  'CPU ms per plate',
  'clients before / peak / end',
];

export const CLUSTER_METHOD = `The many-accounts scenario (the \`many\` step's,
\`bench/many-accounts.ts\`) twice in one step: first on a redis-server of the step's own, then on a
Redis Cluster of its own, three masters and no replicas on free ports, the 16,384 slots split evenly
by \`redis-cli --cluster create\`; the workers and the bench's library instance are given
\`VQ_REDIS_MODE=cluster\` and the three masters' URLs as \`REDIS_URL\`. Each account's keys share
one slot (hash tag \`{<queue>.<account>}\`), the few structures every account shares the prefix's
(\`src/redis/keys.ts\`); which master holds an account is read with \`CLUSTER KEYSLOT\` of its tag
against \`CLUSTER SLOTS\`. Each master is read directly (INFO \`total_commands_processed\`,
\`used_cpu_user + used_cpu_sys\`, \`connected_clients\`; the step's own calls subtracted). The
capacity estimate is 1 s ÷ the busiest master's CPU per plate, the same as the run's plates/s ÷ the
share of a core that master used: the plates/s the setup would carry before that master fills its
core, if nothing else ran out first. That CPU per plate includes what a master spends each second
whatever the rate (its cron over every connection, the workers' reads of idle queues), so a run held
longer by a busy machine shows more of it. On this 2-core machine the three masters, the four
workers, the simulator and the bench share the same two cores, and both runs are held to the keys'
limits, so the cluster's own plates/s here cannot exceed one Redis's; what transfers to machines
with a core per master is each master's share of the commands and its CPU per plate, which is what
the estimate is made of. It leaves out the workers (their CPU per plate is in the table; more
processes carry more) and the upstream's limits.`;

function clusterTitle(f: ClusterFigures): string {
  return `${manyTitle(f.single.figures)}; one Redis, then a ${f.settings.masters}-master Redis Cluster`;
}

function notes(f: ClusterFigures): string[] {
  const out: string[] = [];
  for (const [name, run] of [
    ['one Redis', f.single],
    ['cluster', f.cluster],
  ] as const) {
    const { lowest, log } = manyNotes(run.figures);
    if (lowest) out.push(`${name}: ${lowest}`);
    if (log) out.push(`${name}, worker log lines other than info: ${log}`);
  }
  return out;
}

export function clusterTables(f: ClusterFigures): { text: string; markdown: string } {
  const side = sideBySide(f);
  const masters = masterRows(f);
  const b = busiest(f.cluster);
  const summary =
    `capacity before the busiest master fills a core: one Redis ${f.capacity.singlePlatesPerS.toLocaleString('en')} plates/s, ` +
    `the cluster ${f.capacity.clusterPlatesPerS.toLocaleString('en')} plates/s (× ${f.capacity.ratio.toFixed(2)}; ` +
    `its busiest master took ${(b.commandShare * 100).toFixed(0)} % of the commands with ${((b.accounts / f.settings.accounts) * 100).toFixed(0)} % of the accounts)`;
  return {
    text: [
      clusterTitle(f),
      text(SIDE_HEAD, side),
      '',
      `the cluster's masters:\n${text(MASTER_HEAD, masters)}`,
      summary,
      ...notes(f),
    ].join('\n'),
    markdown: [
      '## One Redis and a 3-master Redis Cluster (issue 21)',
      '',
      `Redis ${f.single.figures.redisVersion}. ${CLUSTER_METHOD}`,
      '',
      `**${clusterTitle(f)}**`,
      '',
      markdown(SIDE_HEAD, side),
      '',
      "**The cluster's masters**",
      '',
      markdown(MASTER_HEAD, masters),
      '',
      `${summary.charAt(0).toUpperCase()}${summary.slice(1)}.`,
      '',
      ...notes(f).flatMap((n) => [n, '']),
    ].join('\n'),
  };
}

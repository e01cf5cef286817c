// A watch list as the API and the console show it: times as ISO text, the schedule as typed.
import type { WatchReply } from '../schemas/watch.js';
import { windowText } from './schedule.js';
import type { WatchView } from './watches.js';

const iso = (ms: number) => new Date(ms).toISOString();

export function everyText(ms: number): string {
  for (const [unit, size] of [
    ['d', 86_400_000],
    ['h', 3_600_000],
    ['m', 60_000],
    ['s', 1000],
  ] as const)
    if (ms % size === 0) return `${ms / size}${unit}`;
  return `${ms}ms`;
}

export function watchReply(v: WatchView): WatchReply {
  return {
    name: v.name,
    account: v.account,
    ...(v.everyMs !== undefined ? { every: everyText(v.everyMs) } : {}),
    ...(v.cron !== undefined ? { cron: v.cron } : {}),
    ...(v.window !== undefined ? { window: windowText(v.window) } : {}),
    overlap: v.overlap,
    notify: v.notify,
    ...(v.callbackUrl !== undefined ? { callbackUrl: v.callbackUrl } : {}),
    ignore: v.ignore,
    ...(v.perMonth !== undefined ? { perMonth: v.perMonth } : {}),
    spentThisMonth: v.spentThisMonth,
    format: v.format,
    plates: v.plates,
    paused: v.paused,
    state: v.state,
    ...(v.reason !== undefined ? { reason: v.reason } : {}),
    round: v.round,
    skipped: v.skipped,
    ...(v.nextAt !== undefined ? { nextAt: iso(v.nextAt) } : {}),
    rounds: v.rounds.map((r) => ({
      round: r.round,
      batchId: r.batchId,
      plates: r.plates,
      startedAt: iso(r.startedAt),
      ...(r.closedAt !== undefined ? { closedAt: iso(r.closedAt) } : {}),
      ...(r.changedPlates !== undefined ? { changedPlates: r.changedPlates } : {}),
      ...(r.changes !== undefined ? { changes: r.changes } : {}),
      ...(r.firstRecord !== undefined ? { firstRecord: r.firstRecord } : {}),
      ...(r.creates !== undefined ? { creates: r.creates } : {}),
      ...(r.failed !== undefined ? { failed: r.failed } : {}),
    })),
  };
}

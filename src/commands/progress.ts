// Progress of one batch: a redrawn line on a terminal (done/failed/total, rate, ETA, and why it
// waits), periodic pino lines otherwise (logs, CI, containers).
import type { Logger } from 'pino';
import type { BatchInfo } from '../queue/batch/store.js';
import type { AccountLineState as LineState } from '../queue/accounts.js';
import { describeLine, duration } from '../presenters/text.js';

export interface Progress {
  update(info: BatchInfo, line: LineState): void;
  finish(): void;
}

interface Sample {
  at: number;
  finished: number;
}

export function createProgress(
  out: NodeJS.WritableStream & { isTTY?: boolean; columns?: number },
  logger: Logger,
  options: { now?: () => number; logEveryMs?: number } = {},
): Progress {
  const now = options.now ?? Date.now;
  const logEveryMs = options.logEveryMs ?? 5_000;
  const samples: Sample[] = [];
  let lastLog = 0;
  let drawn = false;

  function rateOf(finished: number): number {
    const t = now();
    samples.push({ at: t, finished });
    while (samples.length > 2 && t - samples[0]!.at > 15_000) samples.shift();
    const first = samples[0]!;
    return t > first.at ? ((finished - first.finished) * 1000) / (t - first.at) : 0;
  }

  return {
    update(info, line) {
      const c = info.counts;
      const finished = c.done + c.failed;
      const total = c.enqueued;
      const rate = rateOf(finished);
      const eta = rate > 0 ? ((total - finished) / rate) * 1000 : Number.NaN;
      const waiting = describeLine(line);
      if (out.isTTY) {
        const width = 24;
        const filled = total > 0 ? Math.round((finished / total) * width) : 0;
        const bar = `${'█'.repeat(filled)}${'░'.repeat(width - filled)}`;
        const text = `${bar} ${finished}/${total} (${c.done} done, ${c.failed} failed) ${rate.toFixed(1)}/s ETA ${duration(eta)}${waiting ? ` — ${waiting}` : ''}`;
        out.write(`\r\x1b[2K${text.slice(0, Math.max(40, (out.columns || 120) - 1))}`);
        drawn = true;
        return;
      }
      if (now() - lastLog >= logEveryMs || finished === total) {
        lastLog = now();
        logger.info(
          {
            batchId: info.id,
            done: c.done,
            failed: c.failed,
            total,
            inflight: c.inflight,
            ratePerSec: Number(rate.toFixed(2)),
            etaSec: Number.isFinite(eta) ? Math.round(eta / 1000) : null,
            ...(waiting ? { waiting } : {}),
          },
          'progress',
        );
      }
    },
    finish() {
      if (drawn) out.write('\n');
      drawn = false;
    },
  };
}

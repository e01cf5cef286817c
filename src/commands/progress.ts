// Progress of one batch: a redrawn line on a terminal (done/failed/total, rate, ETA, and why it
// waits), periodic pino lines otherwise (logs, CI, containers).
import type { DestinationStream, Logger } from 'pino';
import { clock } from '../clock.js';
import { slackText } from '../plans/deadline.js';
import { batchCapWaiting } from '../presenters/line.js';
import { describeLine, duration } from '../presenters/text.js';
import type { BatchInfo } from '../queue/batch/store.js';
import type { AccountLineState as LineState } from '../queue/line.js';
import { printable } from '../upstream/bounds.js';

export interface Progress {
  /** `slackMs`: with a deadline, the deadline less the projected finish (docs/plans.md). */
  update(info: BatchInfo, line: LineState, slackMs?: number): void;
  finish(): void;
}

/**
 * Plates finish in waves (a round of polls answers together, a 429 holds every worker), so the
 * rate over the last few seconds swings several-fold and an ETA computed from it jumps. The rate
 * used for the ETA is an exponentially weighted moving average of finished plates per second with
 * this time constant: a wave moves it a little, a slowdown that lasts moves it all the way.
 */
export const RATE_TIME_CONSTANT_MS = 30_000;

/** What the rate estimate keeps between samples. */
export interface RateState {
  /** Time (ms) and finished count of the last sample. */
  at: number;
  finished: number;
  /** Time of the first sample. */
  since: number;
  /** The moving average of plates per second, started at 0 (see ratePerSecond). */
  weighted: number;
  tauMs: number;
}

/** The estimate after one more sample (time in ms, plates finished so far). Pure. */
export function nextRate(
  prev: RateState | undefined,
  at: number,
  finished: number,
  tauMs = RATE_TIME_CONSTANT_MS,
): RateState {
  if (prev === undefined) return { at, finished, since: at, weighted: 0, tauMs };
  const dt = at - prev.at;
  // A sample at the same instant adds nothing; its plates count in the next interval.
  if (dt <= 0) return prev;
  // Samples need not be evenly spaced: an interval's weight follows its length.
  const instant = (Math.max(0, finished - prev.finished) * 1000) / dt;
  const keep = Math.exp(-dt / prev.tauMs);
  return { ...prev, at, finished, weighted: prev.weighted * keep + instant * (1 - keep) };
}

/**
 * Plates per second. The average starts at 0, so early on it is divided by the weight seen so far
 * (as Adam does): in the first seconds it is the plain average since the first sample.
 */
export function ratePerSecond(state: RateState): number {
  const seen = 1 - Math.exp(-(state.at - state.since) / state.tauMs);
  return seen > 0 ? state.weighted / seen : 0;
}

/** Milliseconds until `remaining` more plates finish at the smoothed rate; NaN while nothing has finished. */
export function etaMs(state: RateState, remaining: number): number {
  if (remaining <= 0) return 0;
  const rate = ratePerSecond(state);
  return rate > 0 ? (remaining / rate) * 1000 : Number.NaN;
}

/**
 * Early in a run the finished count means little: nothing finishes before the first poll (15 s
 * by default), then plates finish in waves, and an ETA from that rate was 10-100× too long (issue
 * 46: "about 6 min 13 s left" for a run that ended at 33 s). Until this many plates have finished
 * (or RATE_TIME_CONSTANT_MS has passed) the ETA comes from the account's pace instead.
 */
export function measured(finished: number, total: number, elapsedMs: number): boolean {
  return finished >= Math.min(total, Math.max(10, total * 0.1)) || elapsedMs >= RATE_TIME_CONSTANT_MS;
}

/** A plate costs close to two requests (a create and a poll: the README's promise). */
const REQUESTS_PER_PLATE = 2;

/**
 * The ETA, ms: from the measured rate once it means something, before that from the account's
 * pace (requests per second; undefined: not known yet, the ETA is `measuring`).
 */
export function runEta(state: RateState, remaining: number, total: number, pacePerSecond: number | undefined) {
  if (remaining <= 0) return 0;
  if (measured(total - remaining, total, state.at - state.since)) return etaMs(state, remaining);
  if (pacePerSecond === undefined || pacePerSecond <= 0) return 'measuring' as const;
  return (remaining / (pacePerSecond / REQUESTS_PER_PLATE)) * 1000;
}

type Terminal = NodeJS.WritableStream & { isTTY?: boolean; columns?: number };

const CLEAR_LINE = '\r\x1b[2K';

/**
 * The ticker: the one terminal line the progress bar is redrawn on (not an account's line), and a
 * way for log lines to get past it.
 */
export interface Ticker {
  /** Draws the line again with this text. */
  draw(text: string): void;
  /** Leaves the line as it is and moves below it, so what is printed next starts a line of its own. */
  end(): void;
  /**
   * A pino destination writing to `err`: while the line is shown, each log line first clears it
   * and then draws it again below, so a warning never lands in the middle of the bar.
   */
  logs(err: NodeJS.WritableStream): DestinationStream;
}

export function createTicker(out: Terminal): Ticker {
  let shown: string | undefined;
  return {
    draw(text) {
      shown = text;
      out.write(`${CLEAR_LINE}${printable(text)}`);
    },
    end() {
      if (shown !== undefined) out.write('\n');
      shown = undefined;
    },
    logs(err) {
      return {
        write(chunk: string) {
          if (shown === undefined) {
            err.write(chunk);
            return;
          }
          // Terminal writes are synchronous, so stdout and stderr reach the screen in this order.
          out.write(CLEAR_LINE);
          err.write(chunk.endsWith('\n') ? chunk : `${chunk}\n`);
          out.write(shown);
        },
      };
    },
  };
}

export interface ProgressOptions {
  now?: () => number;
  logEveryMs?: number;
  ticker?: Ticker;
  /**
   * Not a terminal, and nobody asked for logs (LOG_LEVEL unset): a plain line every
   * `logEveryMs` goes here (the command's stdout) instead of a JSON log line, so output piped to a
   * file or `tee` reads as one text.
   */
  print?: (text: string) => void;
  /** The clock the instants in its words are on (VQ_TIME_ZONE). */
  zone?: string;
}

export function createProgress(out: Terminal, logger: Logger, options: ProgressOptions = {}): Progress {
  const now = options.now ?? clock.now;
  const logEveryMs = options.logEveryMs ?? (options.print ? 10_000 : 5_000);
  const status = out.isTTY ? (options.ticker ?? createTicker(out)) : undefined;
  let rate: RateState | undefined;
  let lastLog = 0;

  return {
    update(info, line, slackMs) {
      const c = info.counts;
      const finished = c.done + c.failed;
      const total = c.enqueued;
      rate = nextRate(rate, now(), finished);
      const perSecond = ratePerSecond(rate);
      // A batch held at its cap moves no further until the cap is raised: an ETA from its falling
      // rate would only grow (to thousands of days); say why it waits instead.
      const held = info.blocked === 'budget' && info.finishedAt === undefined;
      const early = held ? Number.NaN : runEta(rate, total - finished, total, line.rate?.perSecond);
      const eta = early === 'measuring' ? Number.NaN : early;
      const waiting = describeLine(line, now(), options.zone) ?? batchCapWaiting(info, now(), options.zone)?.message;
      const due = slackMs !== undefined && info.finishedAt === undefined ? `, ${slackText(slackMs)}` : '';
      if (status !== undefined) {
        const width = 24;
        const filled = total > 0 ? Math.round((finished / total) * width) : 0;
        const bar = `${'█'.repeat(filled)}${'░'.repeat(width - filled)}`;
        const etaText = held ? '' : early === 'measuring' ? ' ETA measuring' : ` ETA ${duration(eta)}`;
        const text =
          `${bar} ${finished}/${total} (${c.done} done, ${c.failed} failed) ` +
          `${perSecond.toFixed(1)}/s${etaText}${due}${waiting ? ` — ${waiting}` : ''}`;
        status.draw(text.slice(0, Math.max(40, (out.columns || 120) - 1)));
        return;
      }
      if (now() - lastLog >= logEveryMs || finished === total) {
        lastLog = now();
        if (options.print) {
          const left = Number.isFinite(eta)
            ? `, about ${duration(eta)} left`
            : early === 'measuring'
              ? ', measuring the rate'
              : '';
          options.print(
            `progress ${finished}/${total} (${c.done} done, ${c.failed} failed), ` +
              `${perSecond.toFixed(1)} plates/s${left}${due}${waiting ? ` — ${waiting}` : ''}`,
          );
          return;
        }
        logger.info(
          {
            batchId: info.id,
            done: c.done,
            failed: c.failed,
            total,
            inflight: c.inflight,
            ratePerSec: Number(perSecond.toFixed(2)),
            etaSec: Number.isFinite(eta) ? Math.round(eta / 1000) : null,
            ...(slackMs !== undefined ? { slackSec: Math.round(slackMs / 1000) } : {}),
            ...(waiting ? { waiting } : {}),
          },
          'progress',
        );
      }
    },
    finish() {
      status?.end();
    },
  };
}

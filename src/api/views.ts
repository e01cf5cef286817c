// How batches and accounts look to API clients. The batch view is shared with the library and the
// CLI (presenters/batch-view.ts); the words of a wait are presenters/waits.ts's English (through
// presenters/line.ts waitingOf), as in the CLI and the console's English.
import { clock } from '../clock.js';
import { rateView, waitingOf } from '../presenters/line.js';
import type { AccountLineState } from '../queue/line.js';
import type { AccountLineView } from '../schemas/api.js';

export { archivedBatchView, batchLinks, batchView } from '../presenters/batch-view.js';
export { waitingOf };

export function lineView(line: AccountLineState, now: number = clock.now()): AccountLineView {
  const waiting = waitingOf(line, undefined, now);
  return {
    account: line.account,
    rateLimit: line.rateLimit,
    ...(line.rate ? { rate: rateView(line.rate, now) } : {}),
    paused: line.paused,
    ...(waiting !== undefined ? { reason: waiting.message, waiting } : {}),
    ...(line.limitedUntil !== undefined ? { limitedUntil: new Date(line.limitedUntil).toISOString() } : {}),
    upstream: upstreamView(line),
  };
}

function upstreamView(line: AccountLineState): AccountLineView['upstream'] {
  const down = line.unreachable;
  if (down !== undefined)
    return {
      state: 'unreachable',
      since: new Date(down.since).toISOString(),
      attempts: down.attempts,
      reason: down.reason,
    };
  const back = line.reachableAgain;
  if (back !== undefined)
    return {
      state: 'ok',
      backAt: new Date(back.at).toISOString(),
      downMs: back.downMs,
      ...(back.reason ? { reason: back.reason } : {}),
    };
  return { state: 'ok' };
}

// How batches and accounts look to API clients. The batch view is shared with the library and the
// CLI (presenters/batch-view.ts); the words come from presenters/line.ts, as in the CLI.
import { rateView, waitingOf } from '../presenters/line.js';
import type { AccountLineState } from '../queue/accounts.js';
import type { AccountLine } from './schemas.js';

export { archivedBatchView, batchLinks, batchView } from '../presenters/batch-view.js';
export { waitingOf };

export function lineView(line: AccountLineState, now: number = Date.now()): AccountLine {
  const waiting = waitingOf(line);
  return {
    account: line.account,
    rateLimit: line.rateLimit,
    ...(line.rate ? { rate: rateView(line.rate, now) } : {}),
    paused: line.paused,
    ...(waiting !== undefined ? { reason: waiting.message, waiting } : {}),
    ...(line.limitedUntil !== undefined ? { limitedUntil: new Date(line.limitedUntil).toISOString() } : {}),
  };
}

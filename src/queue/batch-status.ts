// What a batch's status needs from beyond the batch itself: its account's line and the share of
// the account's rate it gets now. Read through the modules that own them.
import { perSecond } from '../accounts.js';
import type { AccountLineState } from './accounts.js';
import type { BatchInfo } from './batch/store.js';
import type { QueueServices } from './services.js';

export interface BatchContext {
  line: AccountLineState;
  /** Share of the account's creates the batch gets now (0: none waiting, or a higher class first). */
  share: number;
  /** The account's configured rate, requests per second. */
  perSecond: number;
}

export async function batchContext(services: Pick<QueueServices, 'lines' | 'scheduler'>, info: BatchInfo): Promise<BatchContext> {
  const line = services.lines.for(info.account);
  const [state, shares] = await Promise.all([line.state(), services.scheduler.shares(info.account)]);
  return { line: state, share: shares.find((s) => s.batchId === info.id)?.share ?? 0, perSecond: perSecond(line.account) };
}

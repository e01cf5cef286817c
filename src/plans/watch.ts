// The deadline watch: every worker process looks now and then at the batches that carry a deadline
// (only on accounts that were ever given one) and projects each one's finish. A batch whose
// projected finish passes its deadline is "at risk": the flag is set in its hash (read by
// `vqb status`, the API, the console and the metric) and `batch.at_risk` is sent once; when the
// projection is back in time with some room, `batch.back_on_track`. Of several processes that see
// the same turn, the one whose write changed the flag tells (BatchStore.markAtRisk).
import { BatchNotFoundError, isError } from '../errors.js';
import type { QueueServices } from '../services.js';
import { batchPlan } from './projection.js';

/**
 * Back on track only with this much room (or a twentieth of the time left): a projection near the
 * deadline does not flap.
 */
const BACK_ROOM_MS = 5_000;

type WatchServices = Pick<
  QueueServices,
  'accounts' | 'scheduler' | 'redis' | 'keys' | 'config' | 'batches' | 'batchViews' | 'webhooks' | 'learner'
>;

export interface DeadlineTurn {
  batchId: string;
  account: string;
  type: 'batch.at_risk' | 'batch.back_on_track';
  slackMs?: number;
}

/** One look at every deadline batch of the accounts this process serves; returns the turns it told. */
export async function watchDeadlines(
  services: WatchServices,
  served: ReadonlySet<string>,
  now: number,
): Promise<DeadlineTurn[]> {
  const turns: DeadlineTurn[] = [];
  const accounts = (await services.scheduler.deadlineAccounts()).filter((id) => served.has(id));
  for (const account of accounts) {
    for (const { batchId } of await services.scheduler.deadlines(account)) {
      const ref = { id: batchId, account };
      let info: Awaited<ReturnType<WatchServices['batchViews']['get']>>;
      try {
        info = await services.batchViews.get(ref);
      } catch (err) {
        if (!isError(err, BatchNotFoundError)) throw err;
        await services.scheduler.undeadline(account, batchId);
        continue;
      }
      const deadline = info.deadline;
      // Finished (or a deadline taken away): no longer weighed; its flag stays as it finished.
      if (info.finishedAt !== undefined || deadline === undefined) {
        await services.scheduler.undeadline(account, batchId);
        continue;
      }
      const plan = await batchPlan(services, info, now);
      const eta = plan?.verdict.eta;
      if (!plan || !eta) continue;
      const slackMs = plan.verdict.slackMs;
      const projection = {
        expected: eta.expected,
        low: eta.low,
        high: eta.high,
        ...(slackMs !== undefined ? { slackMs } : {}),
      };
      const room = Math.max(BACK_ROOM_MS, (deadline - now) / 20);
      let type: DeadlineTurn['type'] | undefined;
      if (plan.atRisk && info.atRiskSince === undefined && (await services.batches.markAtRisk(ref, now)))
        type = 'batch.at_risk';
      else if (
        !plan.atRisk &&
        info.atRiskSince !== undefined &&
        (slackMs ?? 0) >= room &&
        (await services.batches.markAtRisk(ref, undefined))
      )
        type = 'batch.back_on_track';
      if (type === undefined) continue;
      await services.webhooks.batchDeadline(type, { ...info, deadline }, projection, now);
      turns.push({ batchId, account, type, ...(slackMs !== undefined ? { slackMs } : {}) });
    }
  }
  return turns;
}

// Letting held creates go on when a spending cap is raised. A batch at its own cap was taken out of
// the scheduler and the few jobs it had on the queue sleep in `delayed`; an account at its day or
// month cap stopped being fed and its fed creates sleep until the reset. Raising the cap wakes
// them here.
import type { Accounts } from './accounts.js';
import type { BatchKey } from './batch/store.js';
import type { BatchViews } from './batch/view.js';
import type { Budget } from './budget.js';
import type { Scheduler } from './scheduler.js';
import type { PlateJobData } from './types.js';

/** The parts of the queue a wake touches. */
interface Services {
  accounts: Accounts;
  scheduler: Scheduler;
  budget: Budget;
  batchViews: BatchViews;
}

/** Wakes the creates of every job on the account's queue held as `heldBy` (and, for a batch, only that batch's). */
async function wakeHeld(
  services: Services,
  accountId: string,
  match: (data: PlateJobData) => boolean,
): Promise<number> {
  const queue = services.accounts.queue(accountId);
  let woken = 0;
  for (let start = 0; ; start += 500) {
    const jobs = await queue.getDelayed(start, start + 499);
    for (const job of jobs) {
      if (job && match(job.data)) {
        const { heldBy: _, ...data } = job.data;
        await job.updateData(data);
        await job.promote().catch(() => undefined);
        woken++;
      }
    }
    if (jobs.length < 500) break;
  }
  return woken;
}

/** The batch's cap was raised or removed: it is scheduled again and its held jobs go on. Returns how many woke. */
export async function releaseBatchHold(services: Services, batch: BatchKey): Promise<number> {
  const info = await services.batchViews.get(batch);
  await services.budget.setHeld(info, false);
  await services.scheduler.enlist(info.account, info.id, info.priority, info.weight, info.deadline);
  return wakeHeld(services, info.account, (d) => d.batchId === info.id && d.heldBy === 'batch');
}

/** The account's day or month cap was raised or removed: its creates go on. Returns how many woke. */
export async function releaseAccountHold(services: Services, accountId: string): Promise<number> {
  await services.accounts.line(accountId).releaseCreates();
  return wakeHeld(services, accountId, (d) => d.heldBy === 'day' || d.heldBy === 'month');
}

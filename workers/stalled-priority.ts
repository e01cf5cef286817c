// A job found stalled goes back at its own priority. BullMQ 6.7's stalled check puts each job
// whose worker died at the tail of the queue's wait list, whatever its priority, and a Worker
// takes the wait list before the prioritized set: after one worker of three was killed with its
// jobs (20-30 at work: creates waiting for their slot, polls), every one of them went before an
// interactive plate submitted then, 9-10 s for two of its five plates in the chaos suite, where a
// person waits on a screen. The Worker's public `stalled` event names each job; `Job.changePriority`
// moves it from the wait list to the prioritized set at the priority its hash holds (the fence's,
// a poll's or its class's create). A job fetched meanwhile is in neither: only its priority field
// is written again, the value it had. docs/development.md (BullMQ internals) says what BullMQ
// would need.
import { Job, type Queue, type Worker } from 'bullmq';

/** Each job the Worker finds stalled is put back at its own priority; `onError` hears what fails (Redis gone). */
export function keepPriorityOnStall(
  worker: Worker,
  queue: Queue,
  onError: (err: unknown, jobId: string) => void,
): void {
  worker.on('stalled', (jobId: string) => {
    reprioritize(queue, jobId).catch((err: unknown) => onError(err, jobId));
  });
}

async function reprioritize(queue: Queue, jobId: string): Promise<void> {
  const job = await Job.fromId(queue, jobId);
  // Priority 0 is the wait list's own order; a job removed meanwhile has nothing to move.
  if (!job || !(job.priority > 0)) return;
  await job.changePriority({ priority: job.priority });
}

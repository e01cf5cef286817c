// Watches this process's event loop for stalls long enough to matter: job locks are renewed by
// timers on this loop, so a block (a long synchronous task) or a pause of the whole process (a
// frozen container, a suspended VM, SIGSTOP) of a third of VQ_LOCK_DURATION puts them at risk.
// One warning per stall, with how long it was, so an operator can tell a slow host from a bug.

import type { Logger } from 'pino';
import { type Clock, clock as processClock } from '../src/clock.js';

export function watchEventLoop(
  logger: Logger,
  lockDurationMs: number,
  everyMs = 1_000,
  time: Pick<Clock, 'monotonic' | 'setInterval' | 'clearTimeout'> = processClock,
): () => void {
  const threshold = Math.max(everyMs, lockDurationMs / 3);
  let last = time.monotonic();
  const timer = time.setInterval(() => {
    const now = time.monotonic();
    const stalledMs = now - last - everyMs;
    last = now;
    if (stalledMs < threshold) return;
    logger.warn(
      { event: 'process.stalled', stalledMs: Math.round(stalledMs), lockDurationMs },
      stalledMs >= lockDurationMs
        ? 'this process was paused or its event loop blocked longer than VQ_LOCK_DURATION: jobs it ' +
            'held may have been taken over by other workers (nothing is sent twice unflagged)'
        : 'this process was paused or its event loop blocked for a third of VQ_LOCK_DURATION or ' +
            'more: its job locks were at risk',
    );
  }, everyMs);
  timer.unref();
  return () => time.clearTimeout(timer);
}

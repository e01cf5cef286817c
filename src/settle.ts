import { clock } from './clock.js';
// Waiting for something with a bound: a stop must end whatever Redis or a stuck job does.

/**
 * True when `promise` settles within `ms` (its rejection counts as settled), false when the time
 * ran out first or `cut` (a second Ctrl-C) resolved first.
 */
export async function settlesWithin(promise: Promise<unknown>, ms: number, cut?: Promise<unknown>): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      promise.then(
        () => true,
        () => true,
      ),
      new Promise<false>((resolve) => {
        timer = clock.setTimeout(() => resolve(false), ms);
      }),
      ...(cut ? [cut.then(() => false as const)] : []),
    ]);
  } finally {
    clock.clearTimeout(timer);
  }
}

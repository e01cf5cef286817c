// A process that stops starts no Worker afterwards: a feed pass still running at the stop once
// started its busy account's Worker again after every Worker was closed, and the process exited
// with the jobs that Worker had taken left active (CI, stop 48: 52 active after a clean SIGTERM).
import { describe, expect, it } from 'vitest';
import { type AccountRun, AccountWorkers } from '../../workers/account-workers.js';

function fakeRun(closed: string[], id: string): AccountRun {
  // Only what AccountWorkers calls: close on the Worker and the client, and stopWaits.
  return {
    worker: { close: async () => void closed.push(`worker ${id}`) },
    client: { close: async () => void closed.push(`client ${id}`) },
    flow: {},
    stopWaits: () => undefined,
  } as unknown as AccountRun;
}

describe('AccountWorkers', () => {
  it('starts no Worker once closeAll has begun, and closes every one it started', async () => {
    const started: string[] = [];
    const closed: string[] = [];
    const runs = new AccountWorkers(
      { for: (id: string) => ({ id }) as never },
      (account) => {
        started.push(account.id);
        return fakeRun(closed, account.id);
      },
      () => 0,
    );
    runs.busy('a');
    runs.busy('a');
    expect(started).toEqual(['a']);
    const closing = runs.closeAll();
    // A feed pass that was in flight when the stop came names its busy accounts again.
    runs.busy('a');
    runs.busy('b');
    await closing;
    expect(started).toEqual(['a']);
    expect(closed).toEqual(['worker a', 'client a']);
    expect(runs.ids()).toEqual([]);
  });
});

// The jobs at work in an account's Worker: VQ_CONCURRENCY at least, more for the rate and the
// upstream's answer time; polls waiting for their time add to it.
import type { Worker } from 'bullmq';
import { describe, expect, it } from 'vitest';
import { AnswerTime, jobsNeeded, MOST_AT_WORK, MOST_LENT, POLL_ROOM, PollRoom } from '../../workers/poll-room.js';

/** What PollRoom touches of a BullMQ Worker: its concurrency, and the loop queue it nudges. */
function fakeWorker(): { worker: Worker; concurrency: () => number; nudges: () => number } {
  let nudges = 0;
  const w = { concurrency: 0, mainLoopQueue: { add: () => void nudges++ } };
  return { worker: w as unknown as Worker, concurrency: () => w.concurrency, nudges: () => nudges };
}

describe('jobs at work', () => {
  it('follow the rate times twice the answer time plus the steps of a request', () => {
    expect(jobsNeeded(30, 2)).toBe(5); // 30 × 0.154 s
    expect(jobsNeeded(400, 2)).toBe(62);
    expect(jobsNeeded(100, 125)).toBe(40);
    expect(jobsNeeded(1, 0)).toBe(1);
    expect(jobsNeeded(10_000, 5_000)).toBe(MOST_AT_WORK);
  });

  it('are VQ_CONCURRENCY at least; more when needed, with polls waiting on top; a rise nudges BullMQ to fetch', () => {
    const room = new PollRoom(8);
    const w = fakeWorker();
    room.attach(w.worker);
    room.need(5);
    expect(room.atWork).toBe(8);
    expect(w.nudges()).toBe(0);
    room.need(40);
    expect(w.concurrency()).toBe(40);
    expect(w.nudges()).toBe(1);
    expect(room.enter()).toBe(true);
    expect(w.concurrency()).toBe(41);
    room.need(12);
    expect(w.concurrency()).toBe(13);
    expect(w.nudges()).toBe(2); // the poll's entry, not the fall
    room.leave();
    expect(w.concurrency()).toBe(12);
  });

  it('holds POLL_ROOM waiting polls, at least 1,000 (a closing batch waits with all of its polls), and no more', () => {
    // A batch's polls wait together while its last creates go out: a cold 300-plate batch filled
    // a room of 256.
    const room = new PollRoom(8);
    const w = fakeWorker();
    room.attach(w.worker);
    let entered = 0;
    while (room.enter()) entered++;
    expect(entered).toBe(POLL_ROOM);
    expect(entered).toBeGreaterThanOrEqual(1_000);
    expect(w.concurrency()).toBe(8 + POLL_ROOM);
    room.leave();
    expect(room.enter()).toBe(true);
  });

  it('lends a place beyond them for new work, nudging BullMQ to fetch, until a fetch takes it back; MOST_LENT at most', () => {
    const room = new PollRoom(8);
    const w = fakeWorker();
    room.attach(w.worker);
    room.enter();
    expect(w.concurrency()).toBe(9);
    const nudged = w.nudges();
    room.lend();
    expect(w.concurrency()).toBe(10);
    expect(w.nudges()).toBe(nudged + 1);
    room.fetched();
    expect(w.concurrency()).toBe(9);
    room.fetched(); // a fetch with nothing lent takes nothing
    expect(w.concurrency()).toBe(9);
    for (let i = 0; i < MOST_LENT + 3; i++) room.lend();
    expect(w.concurrency()).toBe(9 + MOST_LENT);
  });

  it('answer time: one slow answer moves it a tenth of the way', () => {
    const t = new AnswerTime();
    expect(t.add(100)).toBe(100);
    expect(t.add(1_100)).toBe(200);
  });
});

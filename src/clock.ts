// The one place vqb reads the time and sets its timers (issue 45): every `now`, monotonic reading
// and timer of src/ and workers/ goes through `clock`, so a test can tell what a module asks of
// time, and the parts that take a `now` (the stores, the feeder, the scheduler, the line) are
// handed `clock.now` by default. What every machine must agree on is not here: the pace, the
// hold and the learner read Redis TIME in their scripts (src/redis/lua/includes/pace-take.lua),
// and only a test hands them a time of its own (test/integration/pace-clock.test.ts).
// test/unit/clock.test.ts holds that no other module reads Date.now(), performance.now() or
// sets a timer itself.

export interface Clock {
  /** Epoch ms, the wall clock (what is stored and shown). */
  now(): number;
  /** A monotonic reading in ms (what durations and lateness are measured with). */
  monotonic(): number;
  /** Runs `run` once after `ms` (a promise's `resolve` will do: its argument is left unset). */
  setTimeout(run: (...args: never[]) => unknown, ms: number): NodeJS.Timeout;
  setInterval(run: () => unknown, ms: number): NodeJS.Timeout;
}

export const clock: Clock = {
  now: () => Date.now(),
  monotonic: () => performance.now(),
  setTimeout: (run, ms) => setTimeout(run as () => unknown, ms),
  setInterval: (run, ms) => setInterval(run, ms),
};

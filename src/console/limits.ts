// What one console session, and the console as a whole, may hold at once (issue 35): live streams,
// staged uploads, failed sign-ins. Constants: they bound what one signed-in browser (or someone
// guessing tokens) can make the server and Redis hold, whatever the deployment; only the total
// of staged uploads depends on the Redis it shares, so it is a setting (VQ_CONSOLE_UPLOADS_MAX,
// its default here). Tests pass smaller ones to createHttpApi.

export interface ConsoleLimits {
  /** Live-update streams (`/events`) one session may hold open in one serve process; more are refused (429). */
  streamsPerSession: number;
  /** Live-update streams of every session together in one serve process; more are refused (429). */
  streamsPerProcess: number;
  /** Uploads one session may hold staged (read, priced, not yet confirmed). */
  stagedPerSession: number;
  /** Bytes of staged uploads one session may hold in Redis. */
  stagedBytesPerSession: number;
  /** Staged uploads of every session together, in Redis. */
  stagedTotal: number;
  /** Bytes of staged uploads of every session together, in Redis. */
  stagedBytesTotal: number;
  /** Failed sign-ins from one address within signInWindowMs before the next is refused (429). */
  signInFailures: number;
  /** How long a failed sign-in counts against its address. */
  signInWindowMs: number;
  /**
   * How long a live page whose batches are all finished goes without looking (new work for its
   * accounts is a message that ends the wait sooner): its fallback, for what no message announces.
   */
  streamIdleMs: number;
}

const MiB = 1024 * 1024;

export const CONSOLE_LIMITS: ConsoleLimits = {
  // A few tabs of the console; a fifth page falls back to its Refresh link.
  streamsPerSession: 4,
  // Each open stream costs Redis about 30 commands a second while its batches move (the list
  // page's batches and lines): 100 is 3,000 a second at most from one process, and more console
  // tabs than a team keeps open. A page of finished batches costs that once every streamIdleMs.
  streamsPerProcess: 100,
  // An operator compares an upload or two before confirming; a staged upload takes about 1.7
  // times its file in Redis (its rows as JSON and the estimate: an 8.8 MB CSV, 14.7 MB), so a
  // session holds two uploads of the largest file (VQ_HTTP_BODY_LIMIT, 10 MiB) at most.
  stagedPerSession: 5,
  stagedBytesPerSession: 64 * MiB,
  stagedTotal: 1_000,
  stagedBytesTotal: 256 * MiB,
  signInFailures: 10,
  signInWindowMs: 15 * 60_000,
  // The heartbeat's period: a page of finished batches reads once where it read 15 times.
  streamIdleMs: 15_000,
};

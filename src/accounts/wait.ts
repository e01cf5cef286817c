// Why an account's line waits, named once: the words of `vqb status`, the HTTP API's `waiting`, the
// console, the vqb_line_waiting metric and the worker's flow all come from this list. The upstream
// asking to wait (LimitReason) and Redis stopping a process (RedisWaitReason) are parts of it.

/** Every reason an account's line may wait, in the order the API publishes them. */
export const WAIT_REASONS = [
  'paused',
  'upstream_unreachable',
  'budget',
  'rate_limit',
  'quota',
  'redis_down',
  'redis_full',
] as const;

export type WaitReason = (typeof WAIT_REASONS)[number];

/** The upstream asked the account to wait: a 429, or its quota is used up. */
export type LimitReason = Extract<WaitReason, 'rate_limit' | 'quota'>;

/** This process cannot store (RedisHealth): nothing moves until Redis takes writes again. */
export type RedisWaitReason = Extract<WaitReason, 'redis_down' | 'redis_full'>;

/**
 * What the worker counts as time waited (vqb_line_wait_seconds_total): a limit, a spending cap,
 * Redis; `key` is the label of a pause for a failed key, `answer` of a hold for an answer vqb
 * cannot read (UNRECOGNISED_ANSWER), each counted 0 s per pause.
 */
export type WaitedReason = LimitReason | 'budget' | 'key' | 'answer' | RedisWaitReason;

// What the queue does about each failure. This table is the only place that decides it: the
// processor and the worker look the failure up here and do what the decision says.
//
// | failure                            | action (wait)     | refund | why                                             |
// |------------------------------------|-------------------|--------|-------------------------------------------------|
// | 401 INVALID_API_KEY                | pause-account     | yes    | every job of the key would fail alike           |
// | 401 EXPIRED_API_KEY                | pause-account     | yes    | idem; resumes after the key is rotated          |
// | 403 INSUFFICIENT_PERMISSIONS       | pause-account     | yes    | idem; the message names the permission          |
// | 429, per-window rate               | wait rate_limit   | yes    | the account holds for Retry-After               |
// | 429, daily/monthly quota           | wait quota        | yes    | the account holds until the reset               |
// | 5xx, 408 in the upstream's error   | retry             | yes    | the upstream itself says it failed              |
// | envelope                           |                   |        |                                                 |
// | 5xx without the envelope (a        | retry             | no     | proves nothing: the create may be made          |
// | gateway's)                         |                   |        |                                                 |
// | refused, connect timeout           | retry             | yes    | the request never left                          |
// | reset, timeout after sending       | retry             | no     | it may have been made (and paid)                |
// | answer cut off (reset or stall     | retry             | no     | idem: status seen, answer not read              |
// | mid-body)                          |                   |        |                                                 |
// | 2xx read whole but unusable,       | fail              | no     | made and paid; a re-send would pay for the same |
// | create (not JSON, too large)       |                   |        | garbage again                                   |
// | 2xx we cannot read, poll           | retry             | —      | polls are safe to repeat                        |
// | 2xx JSON nested past the limit     | fail              | no     | the same answer would come again, paid          |
// | 2xx JSON with no id or state we    | hold-answer       | no     | made and paid: the answer is kept with the      |
// | can read (UNRECOGNISED_ANSWER)     |                   |        | plate, the account holds until a setting reads  |
// |                                    |                   |        | it; never failed, never created again (an       |
// |                                    |                   |        | unknown state in a batch: held at its third     |
// |                                    |                   |        | answer)                                         |
// | 404 to a poll                      | retry             | —      | a new query may not be known yet                |
// | other 4xx, query FAILED            | fail              | yes    | a retry would fail (and pay) again              |
// | job stalled too often (BullMQ)     | fail              | —      | recorded as JOB_STALLED                         |
// | any other error, last attempt      | fail              | —      | recorded as INTERNAL_ERROR                      |
//
// A create not refunded stays marked `creating`: the next attempt re-sends it flagged possible
// duplicate (or fails CREATE_UNCERTAIN with VQ_RECREATE_UNCERTAIN=false). Every request that
// left counts as sent in the cost figures, whatever came back (`wasSent`).
import type { LimitReason } from '../src/accounts/wait.js';
import { resumeCommand } from '../src/presenters/waits.js';
import type { AnyUpstreamError, UpstreamErrorKind } from '../src/upstream/errors.js';

export type Action = 'pause-account' | 'wait' | 'retry' | 'fail' | 'hold-answer';

export interface Decision {
  action: Action;
  /** For `wait`: what the account waits for. */
  waitReason?: LimitReason;
  /**
   * A create that failed this way certainly did not reach the upstream, or was answered: give back
   * its spending-cap unit and in-flight slot.
   */
  refundCreate: boolean;
}

/** Refused before anything was sent: the request never reached the upstream. */
const NOT_SENT_CODES = new Set(['CONNECTION_REFUSED', 'CONNECT_TIMEOUT']);

const BY_KIND: Record<UpstreamErrorKind, (error: AnyUpstreamError) => Decision> = {
  'invalid-key': () => ({ action: 'pause-account', refundCreate: true }),
  'expired-key': () => ({ action: 'pause-account', refundCreate: true }),
  permission: () => ({ action: 'pause-account', refundCreate: true }),
  'rate-limited': (e) => ({
    action: 'wait',
    waitReason: e.kind === 'rate-limited' && e.scope === 'quota' ? 'quota' : 'rate_limit',
    refundCreate: true,
  }),
  // Only the upstream's own error envelope (an upstreamCode) proves the create was not made; a
  // status with a body we could not read whole, or a gateway's HTML 502, proves nothing.
  transient: (e) => ({
    action: 'retry',
    refundCreate: NOT_SENT_CODES.has(e.code) || (e.status > 0 && e.upstreamCode !== undefined),
  }),
  'bad-response': (e) =>
    e.kind === 'bad-response' && e.operation === 'get' && !e.final
      ? { action: 'retry', refundCreate: false }
      : { action: 'fail', refundCreate: false },
  unrecognised: () => ({ action: 'hold-answer', refundCreate: false }),
  permanent: (e) =>
    e.kind === 'permanent' && e.operation === 'get' && e.status === 404
      ? { action: 'retry', refundCreate: false }
      : { action: 'fail', refundCreate: true },
};

/** Whether the request left for the upstream (and may count against its quota or bill), whatever came back. */
export function wasSent(error: AnyUpstreamError): boolean {
  return !NOT_SENT_CODES.has(error.code);
}

export function decide(error: AnyUpstreamError): Decision {
  return BY_KIND[error.kind](error);
}

/** BullMQ's own failure reason when a job lost its worker more than `maxStalledCount` times. */
export const STALLED_REASON = 'job stalled more than allowable limit';

/** How a failure BullMQ reports (not one our processor recorded) is stored: its outcome code, or none yet. */
export function decideJobFailure(reason: string, attemptsLeft: boolean): 'JOB_STALLED' | 'INTERNAL_ERROR' | undefined {
  if (reason === STALLED_REASON) return 'JOB_STALLED';
  return attemptsLeft ? undefined : 'INTERNAL_ERROR';
}

/** One line an operator can act on, for the fatal log and for `vqb status`. */
export function adviceFor(error: AnyUpstreamError, accountId: string): string {
  const where =
    accountId === 'default' ? 'VQ_API_KEY_FILE (or VQ_API_KEY and restart)' : `the key file of account ${accountId}`;
  const resume = resumeCommand(accountId);
  switch (error.kind) {
    case 'permission':
      return `give the API key the permission "${error.permission}" (or use a key that has it), then run ${resume}`;
    case 'expired-key':
      return `the API key has expired: put a new key in ${where}, then run ${resume}`;
    case 'invalid-key':
      return `the API key is invalid or revoked: set a valid key in ${where}, then run ${resume}`;
    default:
      return error.message;
  }
}

// What the queue does about each upstream failure. This table is the only place that decides it.
//
// | failure                         | action      | why                                                   |
// |---------------------------------|-------------|-------------------------------------------------------|
// | 401 INVALID_API_KEY             | pause-line  | every job would fail the same way: stop, alert, wait  |
// | 401 EXPIRED_API_KEY             | pause-line  | idem; resumes after the key is rotated                |
// | 403 INSUFFICIENT_PERMISSIONS    | pause-line  | idem; the message names the missing permission        |
// | 429 RATE_LIMIT_EXCEEDED         | wait        | all workers wait out Retry-After; no attempt is spent |
// | 5xx, reset, timeout             | retry       | transient: backoff with jitter, bounded attempts      |
// | 2xx we cannot read (poll)       | retry       | polls are safe to repeat                              |
// | 2xx we cannot read (create)     | fail        | a retry could pay twice; queryId unknown              |
// | other 4xx, query FAILED         | fail        | permanent: a retry would fail (and pay) again         |
import {
  BadResponseError,
  ExpiredKeyError,
  InvalidKeyError,
  PermanentError,
  PermissionError,
  RateLimitedError,
  TransientError,
  type UpstreamError,
} from '../src/upstream/errors.js';

export type Action = 'pause-line' | 'wait' | 'retry' | 'fail';

type ErrorClass = abstract new (...args: never[]) => UpstreamError;

const TABLE: ReadonlyArray<readonly [ErrorClass, Action | ((error: UpstreamError) => Action)]> = [
  [InvalidKeyError, 'pause-line'],
  [ExpiredKeyError, 'pause-line'],
  [PermissionError, 'pause-line'],
  [RateLimitedError, 'wait'],
  [TransientError, 'retry'],
  [BadResponseError, (error) => (error.retryable ? 'retry' : 'fail')],
  [PermanentError, 'fail'],
];

export function actionFor(error: UpstreamError): Action {
  for (const [cls, action] of TABLE) {
    if (error instanceof cls) return typeof action === 'function' ? action(error) : action;
  }
  return error.retryable ? 'retry' : 'fail';
}

/** One line an operator can act on, for the fatal log and for `vqb status`. */
export function adviceFor(error: UpstreamError): string {
  if (error instanceof PermissionError) {
    return `give the API key the permission "${error.permission}" (or use a key that has it), then run \`vqb resume\``;
  }
  if (error instanceof ExpiredKeyError) return 'the API key has expired: put a new key in VQ_API_KEY_FILE (or VQ_API_KEY and restart), then run `vqb resume`';
  if (error instanceof InvalidKeyError) return 'the API key is invalid or revoked: set a valid key in VQ_API_KEY_FILE (or VQ_API_KEY and restart), then run `vqb resume`';
  return error.message;
}

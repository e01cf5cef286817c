// The exit codes commands share (docs/cli.md), apart from the commands that use them, so that a
// small command (\`vqb check\`) does not load a large one (\`vqb run\`, its workers and exports) for
// a number: \`vqb check\` is meant to stay small.
import { errorCodeEntry } from '../error-codes.js';

/** Stopped by the user (Ctrl-C): run the same command again to go on. */
export const EXIT_STOPPED = 130;
/** The account cannot go on: its key failed, an answer vqb cannot read, a key with paid plates stopped. */
export const EXIT_BLOCKED = 3;
/** A run that stopped at a spending cap the user set: a normal outcome (its exports are written). */
export const EXIT_CAPPED = errorCodeEntry('SPENDING_CAP_REACHED')!.exit;

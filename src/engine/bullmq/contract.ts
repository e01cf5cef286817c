// What vqb relies on in BullMQ's internals, as checks a BullMQ upgrade must pass
// (test/integration/bullmq-contract.test.ts runs them against the installed version, and against
// patched copies to show each fails). Each check takes what it reads as an argument (a script's
// text, a class), so nothing here reaches the installed package by itself. A failure names what
// moved: read the new BullMQ's script or class, fix keys.ts or worker.ts (or the Lua they hand
// keys to), and say so in the CHANGELOG.
import { JOB_FIELDS, LOCK_SUFFIX, QUEUE_KEY_TYPES } from './keys.js';
import { MAIN_LOOP_MEMBER, REPLACED_BACKEND_METHODS } from './worker.js';

/** A BullMQ script's text by its file under commands/ (`moveToActive-11.lua`, `includes/removeLock.lua`). */
export type ScriptText = (file: string) => string;

interface ScriptRule {
  file: string;
  /** What the script must still say (a regular expression over its text). */
  says: RegExp;
  /** What vqb relies on, for the failure message. */
  meaning: string;
}

const q = (s: string) => `["']${s}["']`;

/** What vqb's Lua (job-fence, sched-feed, inflight-take) and the marker it writes assume of BullMQ's scripts. */
export const SCRIPT_RULES: readonly ScriptRule[] = [
  {
    file: 'includes/prepareJobForProcessing.lua',
    says: new RegExp(
      `lockKey = jobKey \\.\\. ${q(LOCK_SUFFIX)}\\s+rcall\\(${q('SET')}, lockKey, opts\\[${q('token')}\\]`,
    ),
    meaning: `a job's lock is the key <job key>${LOCK_SUFFIX} holding the worker's token (job-fence checks it)`,
  },
  {
    file: 'updateData-1.lua',
    says: new RegExp(`rcall\\(${q('HSET')}, KEYS\\[1\\], ${q(JOB_FIELDS.data)}, ARGV\\[1\\]\\)`),
    meaning: `a job's data is its hash's field "${JOB_FIELDS.data}" (job-fence reads and writes it)`,
  },
  {
    file: 'changePriority-7.lua',
    says: new RegExp(
      `local jobKey = ARGV\\[2\\] \\.\\. jobId[\\s\\S]*` +
        `rcall\\(${q('HSET')}, jobKey, ${q(JOB_FIELDS.priority)}, priority\\)`,
    ),
    meaning:
      "a job's key is the queue's key prefix and its id; changePriority of an active job only sets " +
      `the field "${JOB_FIELDS.priority}" (job-fence writes it in its place)`,
  },
  {
    file: 'moveToActive-11.lua',
    says: new RegExp(`rcall\\(${q('RPOPLPUSH')}, waitKey, activeKey\\)`),
    meaning: 'wait and active are lists (sched-feed counts them with LLEN)',
  },
  {
    file: 'includes/getWaitPlusPrioritizedCount.lua',
    says: new RegExp(`rcall\\(${q('LLEN')}, waitKey\\)[\\s\\S]*rcall\\(${q('ZCARD')}, prioritizedKey\\)`),
    meaning: 'the jobs waiting are the wait list plus the prioritized zset (sched-feed counts them the same way)',
  },
  {
    file: 'includes/addDelayedJob.lua',
    says: new RegExp(`rcall\\(${q('ZADD')}, delayedKey, score, jobId\\)`),
    meaning: 'delayed jobs are a zset (sched-feed counts it with ZCARD)',
  },
  {
    file: 'includes/getRateLimitTTL.lua',
    says: new RegExp(`rcall\\(${q('PTTL')}, rateLimiterKey\\)`),
    meaning: "the rate-limit switch is the limiter key's time to live (sched-feed reads its PTTL)",
  },
  {
    file: 'includes/getRateLimitTTL.lua',
    says: new RegExp(`maxJobs <= tonumber\\(rcall\\(${q('GET')}, rateLimiterKey\\)`),
    meaning:
      "the switch is on only while the limiter key's count is at `max` (sched-feed compares it with " +
      'RATE_LIMIT_SWITCH.max before it reads the time to live)',
  },
  {
    file: 'includes/addDelayMarkerIfNeeded.lua',
    says: new RegExp(`rcall\\(${q('ZADD')}, markerKey, nextTimestamp, ${q('1')}\\)`),
    meaning: 'the marker is a zset whose member "1" scores when a blocked Worker should look (wakeAt writes it)',
  },
];

/** The rules `read` no longer satisfies, each as a message; [] when BullMQ still does what vqb relies on. */
export function checkScripts(read: ScriptText): string[] {
  const broken: string[] = [];
  for (const rule of SCRIPT_RULES) {
    let text: string;
    try {
      text = read(rule.file);
    } catch {
      broken.push(`BullMQ has no script ${rule.file}: vqb relies on it for: ${rule.meaning}`);
      continue;
    }
    if (!rule.says.test(text)) broken.push(`BullMQ's ${rule.file} changed: vqb relies on it for: ${rule.meaning}`);
  }
  return broken;
}

/** BullMQ's QueueKeys as vqb calls it (its class is exported). */
export interface QueueKeysLike {
  getKeys(name: string): Record<string, string>;
}

/** Every queue key type vqb hands its scripts is still one of BullMQ's, spelled `<prefix>:<name>:<type>`. */
export function checkQueueKeys(QueueKeys: new (prefix?: string) => QueueKeysLike): string[] {
  const keys = new QueueKeys('p').getKeys('q');
  return QUEUE_KEY_TYPES.filter((type) => keys[type] !== `p:q:${type}`).map(
    (type) => `BullMQ's queue has no key "${type}" spelled p:q:${type} (got ${String(keys[type])})`,
  );
}

/**
 * The Worker members and backend methods vqb uses: the concurrency setter (public, and re-read by
 * the main loop), the backend methods quietBackend replaces (on the backend's prototype), and the
 * Worker's main loop setting the member wakeMainLoop reaches (read off the class's source).
 */
export function checkWorker(
  Worker: { prototype: object; toString(): string },
  Backend: { prototype: object },
): string[] {
  const broken: string[] = [];
  const concurrency = Object.getOwnPropertyDescriptor(Worker.prototype, 'concurrency');
  if (typeof concurrency?.set !== 'function') broken.push("BullMQ's Worker has no concurrency setter");
  for (const method of REPLACED_BACKEND_METHODS) {
    if (typeof (Backend.prototype as Record<string, unknown>)[method] !== 'function')
      broken.push(`BullMQ's Redis backend has no method ${method} (quietBackend replaces it)`);
  }
  const source = Worker.toString();
  if (!new RegExp(`this\\.${MAIN_LOOP_MEMBER} = \\w+`).test(source))
    broken.push(
      `BullMQ's Worker no longer keeps its main loop's queue in ${MAIN_LOOP_MEMBER} (wakeMainLoop reaches it)`,
    );
  if (!/numTotal\(\) < this\._concurrency/.test(source))
    broken.push(
      "BullMQ's Worker main loop no longer re-reads its concurrency before each fetch (PollRoom relies on it)",
    );
  return broken;
}

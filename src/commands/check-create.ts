// `vqb check --create PLATE`: the one paid check. One create, then polls of its id until the query
// ends (or the poll deadline), every raw answer printed beside how vqb read it. When vqb cannot
// read an answer, the answer's fields are listed as JSON Pointers with the mapping settings that
// would read it: the way to set the mapping in one step, for one query's price.

import { createInterface } from 'node:readline/promises';
import { type Account, accountKey } from '../accounts/account.js';
import { clock } from '../clock.js';
import type { Config } from '../config.js';
import { UsageError } from '../errors.js';
import { costOf, formatMoney } from '../money.js';
import { checkPlate } from '../plates.js';
import type { CostField } from '../queue/costs.js';
import { withQueueServices } from '../services.js';
import { type AnswerReading, type RawAnswer, readAnswer, UpstreamProbe } from '../upstream/probe.js';
import { answerReader } from '../upstream/response.js';
import type { CommandContext } from './command.js';
import { EXIT_BLOCKED } from './exit.js';

/** Polls whose state is in no list before the check stops asking (the upstream will not change its words). */
const UNKNOWN_STATE_POLLS = 3;
/** Cut of a raw answer on the terminal. */
const SHOWN_BYTES = 4 * 1024;

async function confirmed(ctx: CommandContext, question: string): Promise<boolean> {
  if (ctx.flags.yes === true) return true;
  if (ctx.io.stdin.isTTY !== true) {
    throw new UsageError(
      `${question.replace(/ Go on\?.*$/, '')} There is no terminal to ask: run it again with --yes to send it.`,
    );
  }
  const rl = createInterface({ input: ctx.io.stdin, output: ctx.io.stderr });
  try {
    return /^(y|yes|s|sim)$/i.test((await rl.question(`${question} `)).trim());
  } finally {
    rl.close();
  }
}

export async function checkCreate(
  ctx: CommandContext,
  config: Config,
  account: Account,
  input: string,
): Promise<number> {
  const plate = checkPlate(input);
  // An invalid plate is never sent: the upstream would refuse it, and may bill the refusal.
  if (!plate.ok) throw new UsageError(`--create: ${JSON.stringify(input)} is not a plate: ${plate.message}`);
  const { baseUrl, key } = await accountKey(account);
  const price = account.price ? ` (${formatMoney(costOf(account.price, 1))})` : '';
  const question =
    `vqb check --create sends one real create of ${plate.plate} to ${baseUrl} for ` +
    `account ${account.id}: it costs one query${price}. Go on? [y/N]`;
  if (!(await confirmed(ctx, question))) {
    ctx.print('nothing sent');
    return 1;
  }
  const probe = new UpstreamProbe({ baseUrl, key, timeoutMs: config.upstreamHttp.requestTimeoutMs });
  const sent: CostField[] = [];
  // Read as the account's workers would read it: the built-in shapes and its VQ_ANSWER_* / VQ_STATES_* settings.
  const reader = answerReader(account.answers);
  try {
    ctx.print(`account ${account.id}: one create of ${plate.plate} at ${baseUrl}${price}`);
    const created = await probe.create(plate.plate, account.product);
    sent.push(...sentFields(created, 'create'));
    let reading = show(ctx, created, readAnswer(created, 'create', undefined, clock.now(), reader));
    if (!reading.ok) return failed(ctx, created, reading);
    const queryId = reading.outcome.queryId;
    const deadline = clock.now() + config.poll.deadlineMs;
    let unknown = reading.knownState ? 0 : 1;
    while (!reading.outcome.terminal && unknown < UNKNOWN_STATE_POLLS && clock.now() < deadline) {
      await new Promise((r) => clock.setTimeout(r, config.poll.intervalMs));
      const polled = await probe.get(queryId);
      sent.push(...sentFields(polled, 'get'));
      reading = show(ctx, polled, readAnswer(polled, 'get', queryId, clock.now(), reader));
      if (!reading.ok) return failed(ctx, polled, reading);
      unknown = reading.knownState ? 0 : unknown + 1;
    }
    if (reading.outcome.terminal) {
      ctx.print(
        `vqb understood this upstream end to end: query ${queryId} ended ${reading.outcome.state} ` +
          `("${reading.outcome.status}"); no mapping needed`,
      );
      return 0;
    }
    if (!reading.knownState) {
      ctx.print(
        `the state "${reading.outcome.status}" is in none of vqb's lists: add it to ` +
          `VQ_STATES_PENDING, VQ_STATES_DONE or VQ_STATES_FAILED (comma lists), then check again`,
      );
      return 1;
    }
    ctx.print(
      `query ${queryId} had not ended within VQ_POLL_DEADLINE (${config.poll.deadlineMs} ms); it was read every time`,
    );
    return 1;
  } finally {
    await probe.close();
    ctx.print(await counted(config, account.id, sent));
  }
}

/**
 * What a request of the check is counted as in `vqb cost`, by the workers' rule (queue/costs.ts):
 * sent when it left and the upstream did not refuse it with its own 401/403/429, answered when it
 * was read.
 */
function sentFields(answer: RawAnswer, operation: 'create' | 'get'): CostField[] {
  const refused = [401, 403, 429].includes(answer.status);
  if (answer.networkError?.code === 'CONNECTION_REFUSED' || refused) return [];
  const ok = answer.status >= 200 && answer.status < 300;
  if (operation === 'create') return ok ? ['createsSent', 'creates'] : ['createsSent'];
  return ok ? ['pollsSent', 'polls'] : ['pollsSent'];
}

/**
 * The check's requests in the day's cost counters, so the invoice still reconciles; said when Redis
 * cannot take them.
 */
async function counted(config: Config, accountId: string, fields: readonly CostField[]): Promise<string> {
  if (fields.length === 0) return 'nothing was sent that the upstream may bill';
  try {
    await withQueueServices(config, async (services) => {
      for (const field of fields) await services.costs.countDay(accountId, field);
    });
    const sent = fields.filter((f) => f.endsWith('Sent')).length;
    return `counted in \`vqb cost\` (today, account ${accountId}): ${sent} request(s) that may be billed`;
  } catch (err) {
    return `not counted in \`vqb cost\` (${(err as Error).message}): the upstream may still bill this create`;
  }
}

/** Prints one raw answer and how vqb read it; returns the reading. */
function show(ctx: CommandContext, answer: RawAnswer, reading: AnswerReading): AnswerReading {
  if (answer.networkError) {
    ctx.print(
      `${answer.method} ${answer.path} → no answer after ${answer.roundTripMs} ms (${answer.networkError.code})`,
    );
  } else {
    ctx.print(`${answer.method} ${answer.path} → ${answer.status} in ${answer.roundTripMs} ms`);
    const billing = Object.entries(answer.headers).filter(([name]) => /^x-(query-cost|billed|ratelimit-)/i.test(name));
    if (billing.length > 0) ctx.print(`  headers: ${billing.map(([n, v]) => `${n}: ${v}`).join(', ')}`);
    const text = answer.text.length > SHOWN_BYTES ? `${answer.text.slice(0, SHOWN_BYTES)}…` : answer.text;
    ctx.print(`  raw: ${text}`);
  }
  if (reading.ok) {
    const o = reading.outcome;
    const state = reading.knownState ? o.state : `${o.state}, but "${o.status}" is in no state list`;
    ctx.print(`  vqb read: query id "${o.queryId}", status "${o.status}" → ${state}${o.terminal ? ' (final)' : ''}`);
  } else ctx.print(`  vqb read: cannot use it: ${reading.code}: ${reading.message}`);
  return reading;
}

function failed(ctx: CommandContext, answer: RawAnswer, reading: Extract<AnswerReading, { ok: false }>): number {
  if (['invalid-key', 'expired-key', 'permission'].includes(reading.kind)) return EXIT_BLOCKED;
  if (answer.status >= 200 && answer.status < 300) {
    const fields = pointers(answer.text);
    if (fields.length > 0) {
      ctx.print('the answer holds these fields (JSON Pointer = value):');
      for (const [pointer, value] of fields) ctx.print(`  ${pointer} = ${value}`);
      const id = fields.find(([p]) => /\/(query_?id|id|protocolo|uuid|codigo)$/i.test(p))?.[0];
      const status = fields.find(([p]) => /\/(status|state|situacao|estado)$/i.test(p))?.[0];
      ctx.print(
        `to read it, set VQ_ANSWER_ID${id ? `=${id}` : ''} and VQ_ANSWER_STATUS${status ? `=${status}` : ''} ` +
          '(JSON Pointers into the answer, environment or --set), then check again',
      );
    }
  }
  return 1;
}

/** Up to 40 scalar leaves of a JSON text, as [JSON Pointer, value shown]. */
export function pointers(text: string): [string, string][] {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return [];
  }
  const out: [string, string][] = [];
  const walk = (node: unknown, path: string) => {
    if (out.length >= 40) return;
    if (node !== null && typeof node === 'object') {
      for (const [k, v] of Object.entries(node)) walk(v, `${path}/${k.replaceAll('~', '~0').replaceAll('/', '~1')}`);
    } else {
      const shown = JSON.stringify(node);
      out.push([path || '/', shown.length > 60 ? `${shown.slice(0, 60)}…` : shown]);
    }
  };
  walk(value, '');
  return out;
}

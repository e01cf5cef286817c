// Why a line waits is worded in one place (issue 45): the CLI's and the API's `message`
// (presenters/line.ts) is presenters/waits.ts's English, the sentence the console's English page
// shows; only the way times are written differs between the doors.
import { describe, expect, it } from 'vitest';
import type { RedisWaitReason } from '../../src/accounts/wait.js';
import { batchWaiting, describeRecovery, waitingOf } from '../../src/presenters/line.js';
import { recoveryText, terminalWords, type WordsCtx, waitingText } from '../../src/presenters/waits.js';
import type { BatchInfo } from '../../src/queue/batch/store.js';
import type { AccountLineState } from '../../src/queue/line.js';
import { Waiting } from '../../src/schemas/batch.js';
import { en, LANGS, ptBR } from '../../src/words.js';

const ZONE = 'America/Sao_Paulo';
/** 2026-11-27 17:30 in São Paulo. */
const NOW = Date.UTC(2026, 10, 27, 20, 30, 0);
const line = (state: Partial<AccountLineState> = {}): AccountLineState => ({
  account: 'frota',
  paused: false,
  rateLimit: '60/min',
  ...state,
});
const KEY_MESSAGE =
  'the key expired — the API key has expired: put a new key in the key file of account frota, then run ' +
  '`vqb resume --account frota`';

/** One line for each way a line waits, and what the CLI and the API say of it. */
const CASES: { name: string; state: AccountLineState; redis?: RedisWaitReason; cli: string }[] = [
  {
    name: 'paused, no reason recorded',
    state: line({ paused: true }),
    cli: 'paused (run `vqb resume --account frota`)',
  },
  {
    name: 'paused by vqb pause',
    state: line({
      paused: true,
      pause: { code: 'PAUSED_BY_OPERATOR', message: 'paused by an operator (vqb pause)', at: 0 },
    }),
    cli: 'paused: by an operator (vqb pause)',
  },
  {
    name: 'paused with a reason',
    state: line({ paused: true, pause: { code: 'PAUSED_BY_OPERATOR', message: 'maintenance', at: 0 } }),
    cli: 'paused: by an operator: “maintenance”',
  },
  {
    name: 'paused in the console',
    state: line({ paused: true, pause: { code: 'PAUSED_BY_OPERATOR', message: 'paused in the console', at: 0 } }),
    cli: 'paused: by an operator, in the console',
  },
  {
    name: 'paused by a key failure',
    state: line({ paused: true, pause: { code: 'EXPIRED_API_KEY', message: KEY_MESSAGE, at: 0 } }),
    cli: `paused: ${KEY_MESSAGE}`,
  },
  {
    name: 'held for an answer vqb cannot read',
    state: line({
      paused: true,
      pause: { code: 'UNRECOGNISED_ANSWER', message: 'UNRECOGNISED_ANSWER: no state; set VQ_ANSWER_STATUS', at: 0 },
    }),
    cli: 'paused: UNRECOGNISED_ANSWER: no state; set VQ_ANSWER_STATUS',
  },
  {
    name: 'upstream unreachable',
    state: line({ unreachable: { since: NOW - 125_000, attempts: 15, reason: 'connection refused', lastAt: NOW } }),
    cli:
      'upstream unreachable since 2026-11-27 17:27:55 America/Sao_Paulo (2 min 5 s): connection refused; ' +
      'retrying (attempt 15)',
  },
  {
    name: 'upstream unreachable, an HTTP status',
    state: line({ unreachable: { since: NOW - 30_000, attempts: 3, reason: 'HTTP 502', lastAt: NOW } }),
    cli: 'upstream unreachable since 2026-11-27 17:29:30 America/Sao_Paulo (30 s): HTTP 502; retrying (attempt 3)',
  },
  {
    name: 'the spending cap per day',
    state: line({ budgetUntil: Date.UTC(2026, 10, 28, 3, 0, 0), budgetReason: 'day' }),
    cli:
      'creates wait: the spending cap per day is reached until 2026-11-28 00:00 America/Sao_Paulo ' +
      '(raise it with `vqb budget`; polls go on)',
  },
  {
    name: 'the spending cap per month',
    state: line({ budgetUntil: Date.UTC(2026, 11, 1, 3, 0, 0), budgetReason: 'month' }),
    cli:
      'creates wait: the spending cap per month is reached until 2026-12-01 00:00 America/Sao_Paulo ' +
      '(raise it with `vqb budget`; polls go on)',
  },
  {
    name: 'a 429 wait',
    state: line({ limitedUntil: NOW + 30_000, limitReason: 'rate_limit' }),
    cli: 'rate limited until 2026-11-27 17:30:30 America/Sao_Paulo',
  },
  {
    name: 'the upstream quota',
    state: line({ limitedUntil: NOW + 3 * 3_600_000, limitReason: 'quota' }),
    cli: 'waiting for the upstream quota to reset at 2026-11-27 20:30 America/Sao_Paulo',
  },
  {
    name: 'Redis down',
    state: line(),
    redis: 'redis_down',
    cli: 'waiting for Redis: the connection is lost; paid results are kept in memory until they are stored',
  },
  {
    name: 'Redis full',
    state: line(),
    redis: 'redis_full',
    cli: 'waiting for Redis: it is full (maxmemory reached); raise maxmemory or free memory, work resumes by itself',
  },
];

/** The console's English page, with the CLI's way of writing times. */
const consoleEnOnCliClock: WordsCtx = { lang: 'en', zone: ZONE, times: terminalWords(ZONE).times };

describe('one wording of a wait for the CLI, the API and the console (issue 45)', () => {
  it.each(CASES)('$name: the message is the console’s English sentence', ({ state, redis, cli }) => {
    const waiting = waitingOf(state, redis, NOW, ZONE)!;
    expect(waiting.message).toBe(cli);
    expect(waitingText(terminalWords(ZONE), waiting, state, NOW)).toBe(waiting.message);
    expect(waitingText(consoleEnOnCliClock, waiting, state, NOW)).toBe(waiting.message);
    // With no instant in it, the console's English page shows the message itself.
    if (waiting.until === undefined && waiting.since === undefined)
      expect(waitingText({ lang: 'en', zone: ZONE }, waiting, state, NOW)).toBe(waiting.message);
  });

  it('the console writes the same sentence’s times its own way: Intl in English, pt-BR’s as before', () => {
    const state = line({ limitedUntil: NOW + 30_000, limitReason: 'rate_limit' });
    const waiting = waitingOf(state, undefined, NOW, ZONE);
    expect(waitingText({ lang: 'en', zone: ZONE }, waiting, state, NOW)).toBe(
      'rate limited until Nov 27, 2026, 5:30 PM America/Sao_Paulo',
    );
    expect(waitingText({ lang: 'pt-BR', zone: ZONE }, waiting, state, NOW)).toBe(
      'limite de requisições: até 27/11/2026, 17:30 America/Sao_Paulo',
    );
  });

  it('every reason the schema names has a whole sentence in both languages, no placeholder left', () => {
    const reasons = new Set<string>();
    for (const { state, redis } of CASES) {
      const waiting = waitingOf(state, redis, NOW, ZONE)!;
      reasons.add(waiting.reason);
      for (const lang of LANGS) {
        const text = waitingText({ lang, zone: ZONE }, waiting, state, NOW);
        expect(text, `${lang} ${waiting.reason}`).toMatch(/\S/);
        expect(text, `${lang} ${waiting.reason}`).not.toMatch(/\{\w+\}|undefined/);
      }
    }
    expect([...reasons].sort()).toEqual([...Waiting.shape.reason.options].sort());
  });

  it('a batch at its own cap: the API’s message is the console’s English too', () => {
    const info = { id: 'lote-1', blocked: 'budget', maxCreates: 8, counts: {} } as unknown as BatchInfo;
    const waiting = batchWaiting(info, line(), NOW, ZONE)!;
    expect(waiting).toMatchObject({ reason: 'budget' });
    expect(waiting.message).toBe(
      'creates wait: the batch reached its cap of 8 creates (raise it with `vqb budget lote-1 --max-creates N`; ' +
        'polls go on)',
    );
    expect(waitingText({ lang: 'en', zone: ZONE }, waiting, line(), NOW, info)).toBe(waiting.message);
    expect(waitingText({ lang: 'pt-BR', zone: ZONE }, waiting, line(), NOW, info)).toBe(
      'limite de gastos atingido: as criações esperam no limite do próprio lote, de 8 criações; as consultas ' +
        'seguem (aumente-o com vqb budget lote-1 --max-creates N)',
    );
  });

  it('the recovery after an outage, from the same words', () => {
    const state = line({ reachableAgain: { at: NOW - 180_000, downMs: 200_000, reason: 'connection refused' } });
    expect(describeRecovery(state, NOW, ZONE)).toBe(
      'upstream reachable again since 2026-11-27 17:27:00 America/Sao_Paulo (3 min ago; it was unreachable ' +
        '3 min 20 s: connection refused)',
    );
    expect(recoveryText(consoleEnOnCliClock, state, NOW)).toBe(describeRecovery(state, NOW, ZONE));
    expect(recoveryText({ lang: 'pt-BR', zone: ZONE }, state, NOW)).toBe(
      'fornecedor de volta desde 27/11/2026, 17:27 America/Sao_Paulo (há 3 minutos; ficou fora do ar por ' +
        '3 min 20 s: conexão recusada)',
    );
  });

  it('every wait word is in both languages', () => {
    const keys = Object.keys(en).filter((k) => /^(wait|waitd|pause|reach)\./.test(k));
    expect(keys.length).toBeGreaterThan(20);
    for (const key of keys) {
      expect(en[key as keyof typeof en], `en ${key}`).toMatch(/\S/);
      expect(ptBR[key as keyof typeof en], `pt-BR ${key}`).toMatch(/\S/);
    }
  });
});

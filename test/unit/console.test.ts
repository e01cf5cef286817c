// The console's pure parts: escaping, the language choice, where a redirect may go.
import { describe, expect, it } from 'vitest';
import { progressChart } from '../../src/console/charts.js';
import { html, raw } from '../../src/console/html.js';
import { pickLang, translator } from '../../src/console/i18n.js';
import { failedKey, failedSection } from '../../src/console/pages.js';
import { localPath } from '../../src/console/redirect.js';
import { plural } from '../../src/console/say.js';
import { deadlineView, judgeDeadline } from '../../src/plans/deadline.js';
import { dateText, deadlineText, waitingText } from '../../src/presenters/waits.js';
import { retryWay } from '../../src/queue/rerun.js';
import { Waiting, WebhookDelivery } from '../../src/schemas/batch.js';
import { CALLBACK_HOST_NOT_ALLOWED, CALLBACK_URL_INVALID, WEBHOOK_SECRET_MISSING } from '../../src/webhooks/target.js';

describe('console html', () => {
  it('escapes every value, nested templates and arrays pass as markup', () => {
    const name = `<script>alert("x")</script>&'`;
    expect(html`<p title="${name}">${name}</p>`.text).toBe(
      '<p title="&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&amp;&#39;">&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&amp;&#39;</p>',
    );
    expect(html`<ul>${['a<', 'b'].map((x) => html`<li>${x}</li>`)}</ul>`.text).toBe(
      '<ul><li>a&lt;</li><li>b</li></ul>',
    );
    expect(html`${undefined}${null}${false}${0}${raw('<br>')}`.text).toBe('0<br>');
  });
});

describe('console language', () => {
  it('the cookie first, then Accept-Language by q, then pt-BR', () => {
    expect(pickLang('en', 'pt-BR')).toBe('en');
    expect(pickLang(undefined, 'en-US,en;q=0.9')).toBe('en');
    expect(pickLang(undefined, 'fr;q=1, en;q=0.5, pt;q=0.8')).toBe('pt-BR');
    expect(pickLang(undefined, 'de, fr')).toBe('pt-BR');
    expect(pickLang('xx', undefined)).toBe('pt-BR');
    expect(pickLang(undefined, 'en;q=0')).toBe('pt-BR');
  });

  it('every wait reason, delivery state and callback refusal the schemas name has words in both languages', () => {
    const keys = [
      ...Waiting.shape.reason.options.map((r) => `wait.${r}`),
      ...WebhookDelivery.shape.state.options.map((s) => `delivery.${s}`),
      ...[CALLBACK_URL_INVALID, CALLBACK_HOST_NOT_ALLOWED, WEBHOOK_SECRET_MISSING].map((c) => `callback.${c}`),
      'state.archived',
    ];
    for (const lang of ['en', 'pt-BR'] as const) {
      const t = translator(lang) as (key: string) => string;
      for (const key of keys) expect(typeof t(key) === 'string' && t(key) !== '', `${lang} ${key}`).toBe(true);
    }
    expect(translator('pt-BR')('wait.redis_full')).toBe('Redis cheio');
    expect(translator('en')('wait.redis_down')).toBe('Redis unreachable');
  });

  it('both dictionaries fill in their variables', () => {
    expect(translator('en')('batch.retry.other', { n: 3 })).toBe('Retry the 3 failed plates');
    expect(translator('pt-BR')('batch.retry.other', { n: 3 })).toBe('Tentar de novo as 3 placas com falha');
  });

  it('counts agree with their noun in both languages (issue 22: "as 1 placas com falha")', () => {
    const en = { lang: 'en' as const, t: translator('en') };
    const pt = { lang: 'pt-BR' as const, t: translator('pt-BR') };
    expect(plural(pt, 'batch.retry', 1)).toBe('Tentar de novo a placa com falha');
    expect(plural(pt, 'batch.retry', 2)).toBe('Tentar de novo as 2 placas com falha');
    expect(plural(en, 'batch.retry', 1)).toBe('Retry the failed plate');
    expect(plural(pt, 'flash.retried', 1, { recreated: 0, skipped: 0 })).toBe(
      '1 placa com falha voltou à fila (0 criada de novo, 0 ainda em andamento).',
    );
  });
});

describe('console redirects', () => {
  it('go only to a path of this site', () => {
    expect(localPath('/batches/x?y=1')).toBe('/batches/x?y=1');
    for (const bad of [
      '//evil.example/',
      '/\\evil.example',
      'https://evil.example/',
      'javascript:alert(1)',
      '',
      undefined,
      '/a\r\nSet-Cookie: x',
      // Issue 35 (5): what a browser reads as another host once it drops tabs and newlines, or
      // once the dot segments are resolved; backslashes and slashes hidden by percent-encoding.
      '/\t/evil.example',
      '/\n/evil.example',
      '/.//evil.example',
      '/%2F%2Fevil.example',
      '/%5Cevil.example',
      '/%09/evil.example',
    ])
      expect(localPath(bad)).toBe('/');
    // What a Location header cannot hold raw comes out percent-encoded, not as a 500.
    expect(localPath('/。')).toBe('/%E3%80%82');
  });
});

describe('console: how a failed plate runs again (issue 36, 11)', () => {
  const ctx = { lang: 'en' as const, t: translator('en'), path: '/batches/b', session: { csrf: 'c', admin: true } };
  it('a query the upstream ended is asked again (a poll reads the same answer); one that never ended is polled', () => {
    expect(retryWay({ queryId: 'q1', result: { status: 'FAILED' } })).toBe('ask');
    expect(retryWay({})).toBe('ask');
    expect(retryWay({ queryId: 'q1' })).toBe('poll');
  });

  it('the buttons say their cost, with the amount at the account price; none where nothing failed', () => {
    const summary = {
      total: 5,
      poll: 2,
      ask: 3,
      cancelled: 0,
      codes: [
        { code: 'VEHICLE_NOT_FOUND', way: 'ask' as const, count: 3, plates: ['A', 'B', 'C'] },
        { code: 'POLL_TIMEOUT', way: 'poll' as const, count: 2, plates: ['D', 'E'] },
      ],
    };
    const price = { perQueryMicros: 500_000, perPollMicros: 0, currency: 'BRL' };
    const text = failedSection(ctx, 'b', { summary, price }).text;
    expect(text).toContain('>Poll the 2 plates again (free: no new query)</button>');
    expect(text).toContain('>Ask the upstream again for the 3 plates (costs 3 queries, R$ 1,50)</button>');
    const billed = failedSection(ctx, 'b', { summary, price: { ...price, perPollMicros: 1 } }).text;
    expect(billed).toContain('(no new query; polls are billed)');
    expect(failedSection(ctx, 'b', undefined).text).toContain('No failed plates.');
    expect(failedKey({ summary })).not.toBe(failedKey({ summary: { ...summary, codes: [summary.codes[0]!] } }));
  });

  it('plates a cancel dropped are their own state: never sent, not charged, no button to buy them (issue 46, 2)', () => {
    const summary = { total: 0, poll: 0, ask: 0, cancelled: 4, codes: [] };
    const text = failedSection(ctx, 'b', { summary }).text;
    expect(text).toContain('4 plates cancelled: never sent to the upstream, not charged, not run again.');
    expect(text).not.toContain('<button');
    expect(text).not.toContain('Failed plates');
    const pt = { ...ctx, lang: 'pt-BR' as const, t: translator('pt-BR') };
    expect(failedSection(pt, 'b', { summary }).text).toContain('4 placas canceladas: nunca enviadas ao fornecedor');
    expect(failedKey({ summary })).not.toBe('0');
  });
});

describe("console: the deadline line in the page's language (docs/plans.md)", () => {
  const NOW = Date.parse('2026-11-27T15:00:00Z');
  const figures = {
    perSecond: 10,
    rateSource: 'announced' as const,
    requestsPerPlate: 2,
    answerMs: 2_000,
    aheadPlates: 0,
  };
  const money = { price: { perQueryMicros: 350_000, perPollMicros: 0, currency: 'BRL' }, creates: 100, polls: 110 };
  const pt = { lang: 'pt-BR' as const, t: translator('pt-BR') };
  const en = { lang: 'en' as const, t: translator('en') };

  it('feasible, not feasible and unknown, in pt-BR and en, from the same fields the API gives', () => {
    const easy = deadlineView(judgeDeadline(NOW + 3_600_000, { ...figures, plates: 100 }, NOW, money), NOW);
    expect(deadlineText(pt, easy, NOW)).toMatch(
      /^prazo: viável — até .+ \(em 1 hora\); termina em \d+ s–\d+ s \(no prazo, com folga de 59 min \d\d s\); custa R\$\s?35,00$/,
    );
    // Instants on the clock of VQ_TIME_ZONE, as the CLI shows them (16:00 UTC is 13:00 in São Paulo).
    expect(deadlineText({ ...pt, zone: 'America/Sao_Paulo' }, easy, NOW)).toContain(
      'até 27/11/2026, 13:00 America/Sao_Paulo (em 1 hora)',
    );
    expect(deadlineText({ ...pt, zone: 'UTC' }, easy, NOW)).toContain('até 27/11/2026, 16:00 UTC (em 1 hora)');
    expect(deadlineText(en, easy, NOW)).toMatch(
      /^deadline: feasible — due .+ \(in 1 hour\); finishes in .+ \(on time by 59 min/,
    );
    const tight = deadlineView(judgeDeadline(NOW + 30_000, { ...figures, plates: 2_000, aheadPlates: 150 }, NOW), NOW);
    const said = deadlineText(pt, tight, NOW);
    expect(said).toMatch(
      /^prazo: inviável — até .+; termina em .+, depois de 150 placas à frente dele na chave \(atrasado em /,
    );
    expect(said).not.toMatch(/deadline|due|late/);
    const unknown = deadlineView(
      judgeDeadline(NOW + 60_000, { ...figures, rateSource: 'start', plates: 10 }, NOW),
      NOW,
    );
    expect(deadlineText(pt, unknown, NOW)).toMatch(/^prazo: ainda não se sabe — .+; nenhuma taxa conhecida ainda/);
    // A pooled batch none of whose keys serves: the keys and why, not "before first contact".
    const held = [
      { account: 'k10', why: 'quota' },
      { account: 'k20', why: 'EXPIRED_API_KEY' },
    ];
    const stuck = deadlineView(
      judgeDeadline(NOW + 60_000, { ...figures, perSecond: 0, rateSource: 'configured', plates: 10, held }, NOW),
      NOW,
    );
    expect(stuck.held).toEqual(held);
    expect(stuck.line).toMatch(
      /^deadline: unknown — due .+; no key serves it now: known after one of its keys serving/,
    );
    expect(stuck.line).toContain('k10 quota, k20 EXPIRED_API_KEY');
    expect(deadlineText(pt, stuck, NOW)).toMatch(
      /^prazo: ainda não se sabe — .+; nenhuma chave o atende agora: .+ \(k10 \(quota\), k20 \(EXPIRED_API_KEY\)\)/,
    );
    expect(deadlineText(en, stuck, NOW)).not.toContain('first answers');
  });

  it('a finished batch: met or missed, and when it finished', () => {
    const view = (finishedAt: number) =>
      deadlineView(
        {
          feasibility: 'feasible',
          deadline: NOW - 60_000,
          eta: { low: finishedAt, high: finishedAt, expected: finishedAt },
          slackMs: NOW - 60_000 - finishedAt,
          aheadPlates: 0,
        },
        NOW,
      );
    expect(deadlineText(pt, view(NOW - 120_000), NOW)).toMatch(
      /^prazo: cumprido — .+; concluído em .+ \(no prazo, com folga de 1 min 00 s\)$/,
    );
    expect(deadlineText(en, view(NOW - 30_000), NOW)).toMatch(/^deadline: missed — .+; finished .+ \(late by 30 s\)$/);
  });
});

describe('console words (issue 46, 17)', () => {
  it('a batch held at its own cap (no end time) reads as a whole sentence, not "esperam até ;"', () => {
    const text = waitingText({ lang: 'pt-BR' }, { reason: 'budget', message: 'x' }, undefined)!;
    expect(text).toContain('as criações esperam no limite do próprio lote');
    expect(text).not.toMatch(/até ;|até\s*$/);
    const en = waitingText({ lang: 'en' }, { reason: 'budget', message: 'x' }, undefined)!;
    expect(en).toContain('creates wait: the batch reached its cap of ? creates');
  });
});

describe('console times name their zone (issue 46, 12 and 17)', () => {
  const AT = Date.UTC(2026, 10, 27, 16, 0, 0);
  const pt = { lang: 'pt-BR' as const, t: translator('pt-BR'), zone: 'America/Sao_Paulo' };

  it('an instant, a wait until, a chart’s finish and its table: each with VQ_TIME_ZONE beside the time', () => {
    expect(dateText(pt, AT)).toBe('27/11/2026, 13:00 America/Sao_Paulo');
    expect(dateText({ lang: 'en', zone: 'UTC' }, AT)).toBe('Nov 27, 2026, 4:00 PM UTC');
    const waiting = { reason: 'quota' as const, message: 'x', until: new Date(AT).toISOString() };
    expect(waitingText(pt, waiting, undefined)).toContain('até 27/11/2026, 13:00 America/Sao_Paulo');
    const chart = progressChart(pt, {
      points: [{ at: AT - 60_000, done: 1, failed: 0, requests: 2, limit: 10 }],
      total: 10,
      etaAt: AT,
    }).text;
    expect(chart).toContain('término previsto às 13:00:00 America/Sao_Paulo');
    expect(chart).toContain('<th scope="col">Hora (America/Sao_Paulo)</th>');
  });
});

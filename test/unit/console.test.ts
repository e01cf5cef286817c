// The console's pure parts: escaping, the language choice, where a redirect may go.
import { describe, expect, it } from 'vitest';
import { html, raw } from '../../src/console/html.js';
import { pickLang, translator } from '../../src/console/i18n.js';
import { localPath } from '../../src/console/redirect.js';
import { plural } from '../../src/console/say.js';
import { Waiting, WebhookDelivery } from '../../src/schemas/batch.js';
import {
  CALLBACK_HOST_NOT_ALLOWED,
  CALLBACK_URL_INVALID,
  WEBHOOK_SECRET_MISSING,
} from '../../src/sinks/webhooks/target.js';

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

// Money, pure: amounts as people write them, exact sums, pt-BR formatting, caps in money, and what an
// answer's headers say of its price.
import { describe, expect, it } from 'vitest';
import { pointers } from '../../src/commands/check-create.js';
import { loadConfig } from '../../src/config.js';
import { costOf, createsCap, formatMoney, type Price, parseAmountMicros } from '../../src/money.js';
import { billingFrom } from '../../src/upstream/billing.js';
import { readAnswer } from '../../src/upstream/probe.js';
import { answerReader } from '../../src/upstream/response.js';

const price = (perQuery: number, perPoll = 0, currency = 'BRL'): Price => ({
  perQueryMicros: Math.round(perQuery * 1e6),
  perPollMicros: Math.round(perPoll * 1e6),
  currency,
});

describe('money', () => {
  it('reads amounts as people write them, and refuses what is not one', () => {
    expect(parseAmountMicros('0.35')).toBe(350_000);
    expect(parseAmountMicros('0,35')).toBe(350_000);
    expect(parseAmountMicros('150')).toBe(150_000_000);
    expect(parseAmountMicros('1.234,50')).toBe(1_234_500_000);
    expect(parseAmountMicros('1,234.50')).toBe(1_234_500_000);
    expect(parseAmountMicros('R$ 2,00')).toBe(2_000_000);
    for (const bad of ['', 'cem', '-1', '1.2.3', '0.0000001', '1e3'])
      expect(parseAmountMicros(bad), bad).toBeUndefined();
  });

  it('adds up exactly and formats pt-BR with a plain space', () => {
    expect(costOf(price(0.35), 1_000)).toEqual({ amount: 350, currency: 'BRL' });
    expect(costOf(price(0.1), 3)).toEqual({ amount: 0.3, currency: 'BRL' });
    expect(costOf(price(0.35, 0.01), 10, 25)).toEqual({ amount: 3.75, currency: 'BRL' });
    expect(formatMoney({ amount: 1234.5, currency: 'BRL' })).toBe('R$ 1.234,50');
    expect(formatMoney({ amount: 0, currency: 'BRL' })).toBe('R$ 0,00');
    expect(formatMoney(costOf(price(100.4, 0, 'JPY'), 3))).toBe('JP¥ 301');
    expect(formatMoney(costOf(price(1.1, 0, 'USD'), 3))).toBe('US$ 3,30');
  });

  it('a cap in money is whole creates at the price; the smaller cap holds; no price is NO_PRICE', () => {
    expect(createsCap({ maxSpend: 150 }, price(0.35), 'a')).toBe(428);
    expect(createsCap({ maxSpend: 1.05 }, price(0.35), 'a')).toBe(3);
    expect(createsCap({ maxSpend: 150, maxCreates: 10 }, price(0.35), 'a')).toBe(10);
    expect(createsCap({ maxCreates: 10 }, undefined, 'a')).toBe(10);
    expect(() => createsCap({ maxSpend: 1 }, undefined, 'a')).toThrow(expect.objectContaining({ code: 'NO_PRICE' }));
    expect(() => createsCap({ maxSpend: 1 }, price(0), 'a')).toThrow(/needs a price per query for account a/);
  });

  it('settings: VQ_PRICE_PER_QUERY in VQ_CURRENCY, polls free unless set; a bad amount names the setting', () => {
    const config = loadConfig({ VQ_PRICE_PER_QUERY: '0,35' });
    expect(config.accounts[0]!.price).toEqual({ perQueryMicros: 350_000, perPollMicros: 0, currency: 'BRL' });
    expect(loadConfig({}).accounts[0]!.price).toBeUndefined();
    expect(loadConfig({ VQ_PRICE_PER_QUERY: '1', VQ_CURRENCY: 'usd' }).accounts[0]!.price?.currency).toBe('USD');
    expect(() => loadConfig({ VQ_PRICE_PER_QUERY: 'caro' })).toThrow(/VQ_PRICE_PER_QUERY: expected an amount/);
    expect(() => loadConfig({ VQ_CURRENCY: 'XYZ1' })).toThrow(/VQ_CURRENCY/);
  });

  it('billing headers: a stated price and whether billed, or nothing', () => {
    expect(billingFrom({ 'x-query-cost': '0.40', 'x-billed': 'true' })).toEqual({ costMicros: 400_000, billed: true });
    expect(billingFrom({ 'x-billed': 'false' })).toEqual({ billed: false });
    expect(billingFrom({ 'x-billed': 'maybe' })).toBeUndefined();
    expect(billingFrom({})).toBeUndefined();
  });
});

describe('vqb check --create: how an answer is shown and read', () => {
  const answer = (status: number, text: string) => ({
    method: 'POST' as const,
    path: '/queries/integration/agregados',
    status,
    headers: {},
    text,
    roundTripMs: 1,
  });

  it('an answer vqb cannot read lists its fields as JSON Pointers', () => {
    const text = JSON.stringify({ statusCode: 201, data: { ticket: 'p-1', fase: 'PROCESSANDO', a: [1] } });
    const reading = readAnswer(answer(201, text), 'create');
    expect(reading).toMatchObject({ ok: false, code: 'UNRECOGNISED_ANSWER' });
    expect(pointers(text)).toEqual([
      ['/statusCode', '201'],
      ['/data/ticket', '"p-1"'],
      ['/data/fase', '"PROCESSANDO"'],
      ['/data/a/0', '1'],
    ]);
    // The same answer read with the settings a user would set from those pointers.
    const mapped = readAnswer(
      answer(201, text),
      'create',
      undefined,
      Date.now(),
      answerReader({ id: '/data/ticket', status: '/data/fase', pending: [], done: [], failed: [] }),
    );
    expect(mapped).toMatchObject({ ok: true, outcome: { queryId: 'p-1', state: 'pending' } });
  });

  it('a readable answer, and an unknown state marked as such', () => {
    const ok = readAnswer(answer(201, JSON.stringify({ queryId: 'q', status: 'PROCESSING' })), 'create');
    expect(ok).toMatchObject({ ok: true, knownState: true, outcome: { queryId: 'q', state: 'pending' } });
    // A state in no list is not guessed at: the reading stops there, as a worker's would hold.
    const odd = readAnswer(answer(200, JSON.stringify({ queryId: 'q', status: 'NA_FILA' })), 'get');
    expect(odd).toMatchObject({ ok: false, code: 'UNRECOGNISED_ANSWER' });
    const expired = readAnswer(
      answer(401, JSON.stringify({ statusCode: 401, error: { code: 'EXPIRED_API_KEY', message: 'x' } })),
      'get',
    );
    expect(expired).toMatchObject({ ok: false, kind: 'expired-key' });
  });
});

// What is kept of an answer vqb cannot read, and what the account's hold says about it (issue 34):
// secrets never kept, a few KB at most and still JSON, the fields and the settings that read it.
import { describe, expect, it } from 'vitest';
import { parseAccounts } from '../../src/accounts/account.js';
import { loadConfig } from '../../src/config.js';
import { ConfigError } from '../../src/errors.js';
import { describeUnreadable, keepable, normalState, pointerGet, StateLists } from '../../src/upstream/answers.js';

describe('keeping an answer with its plate', () => {
  it('redacts secret-looking fields and the key wherever it appears', () => {
    const kept = keepable(
      { body: { ticket: 't1', apiKey: 'k', token: 'x', echo: 'sent with KEY-123', nested: { senha: 'p' } } },
      4_096,
      'KEY-123',
    );
    expect(kept).toEqual({
      body: {
        ticket: 't1',
        apiKey: '[redacted]',
        token: '[redacted]',
        echo: 'sent with [redacted]',
        nested: { senha: '[redacted]' },
      },
    });
  });

  it('cuts a large answer to a few KB and keeps it JSON, the id still readable', () => {
    const big = {
      body: { ticket: 't-77', fase: 'X', veiculo: { fotos: Array.from({ length: 5_000 }, (_, i) => `foto-${i}`) } },
    };
    const kept = keepable(big);
    expect(JSON.stringify(kept).length).toBeLessThanOrEqual(4_096);
    expect(pointerGet(kept, '/body/ticket')).toBe('t-77');
  });
});

describe('states and pointers', () => {
  it('compares states without case, accents or separators', () => {
    expect(normalState(' Concluída ')).toBe('CONCLUIDA');
    expect(normalState('em-andamento')).toBe('EM_ANDAMENTO');
    const lists = new StateLists({ pending: [], done: ['Entregue'], failed: ['PROCESSADA'] });
    expect(lists.classify('ENTREGUE')).toBe('completed');
    // The operator's word comes first: a state the built-in lists call done may be theirs to call failed.
    expect(lists.classify('processada')).toBe('failed');
    expect(lists.classify('ETAPA_1')).toBeUndefined();
  });

  it('reads RFC 6901 pointers, escapes and array indexes included', () => {
    const doc = { 'a/b': { '~c': [{ id: 'x' }] } };
    expect(pointerGet(doc, '/a~1b/~0c/0/id')).toBe('x');
    expect(pointerGet(doc, '/a~1b/missing')).toBeUndefined();
    expect(pointerGet(doc, '')).toBe(doc);
  });
});

describe("the hold's message", () => {
  it('lists the fields and values and names the settings that would read the answer', () => {
    const answer = { statusCode: 201, body: { ticket: 'q0-1a2b', fase: 'ETAPA_1', licensePlate: 'AAA0000' } };
    const text = describeUnreadable('create', 'no-id', answer, 'ETAPA_1', 'default');
    expect(text).toContain('UNRECOGNISED_ANSWER');
    expect(text).toContain('/body/ticket = "q0-1a2b"');
    expect(text).toContain('/body/fase = "ETAPA_1"');
    expect(text).toContain('VQ_ANSWER_ID=/body/ticket');
    expect(text).toContain('VQ_ANSWER_STATUS=/body/fase');
    expect(text).toContain('VQ_STATES_PENDING');
    // A state vqb knows needs no setting.
    const known = describeUnreadable(
      'create',
      'no-id',
      { data: { ref: 'AB12345', status: 'PROCESSANDO' } },
      undefined,
      'x',
    );
    expect(known).toContain('VQ_ANSWER_ID=/data/ref');
    expect(known).not.toContain('VQ_STATES_PENDING');
    expect(known).toContain('account x: answerId');
  });
});

describe('the mapping settings', () => {
  it('come from the environment (and --set), validated as pointers', () => {
    const config = loadConfig({ VQ_ANSWER_ID: '/data/ticket', VQ_STATES_DONE: 'ENTREGUE, PRONTA' });
    expect(config.accounts[0]!.answers).toMatchObject({ id: '/data/ticket', done: ['ENTREGUE', 'PRONTA'] });
    expect(() => loadConfig({ VQ_ANSWER_STATUS: 'data.status' })).toThrow(ConfigError);
  });

  it('per account in the accounts file, over the environment', () => {
    const defaults = {
      baseUrl: 'https://x',
      product: 'agregados',
      rateLimit: { max: 1, durationMs: 1_000, text: '1/s' },
      answers: { id: '/body/id', pending: ['A'], done: [], failed: [] },
    };
    const [frota, outra] = parseAccounts(
      JSON.stringify({
        accounts: [
          { id: 'frota', answerId: '/data/ticket', statesPending: 'ETAPA_1', statesDone: ['ETAPA_FINAL'] },
          { id: 'outra' },
        ],
      }),
      defaults,
    );
    expect(frota!.answers).toEqual({
      id: '/data/ticket',
      pending: ['A', 'ETAPA_1'],
      done: ['ETAPA_FINAL'],
      failed: [],
    });
    expect(outra!.answers).toEqual({ id: '/body/id', pending: ['A'], done: [], failed: [] });
    expect(() => parseAccounts(JSON.stringify({ accounts: [{ id: 'a', answerId: 'ticket' }] }), defaults)).toThrow(
      /answerId/,
    );
  });
});

// Reading upstream answers: the shapes the contract doc says we must tolerate, and the one typed
// error each failure becomes.
import { describe, expect, it } from 'vitest';
import {
  BadResponseError,
  ExpiredKeyError,
  InvalidKeyError,
  PermanentError,
  PermissionError,
  RateLimitedError,
  TransientError,
  UnrecognisedAnswerError,
  UpstreamError,
} from '../../src/upstream/errors.js';
import { answerReader, classifyStatus, errorFromResponse, parseQueryBody } from '../../src/upstream/response.js';
import { decide } from '../../workers/actions.js';

const NOW = Date.UTC(2030, 0, 1, 12, 0, 0);
const json = (value: unknown) => JSON.stringify(value);
const envelope = (status: number, body: unknown) => json({ statusCode: status, body });
const errorBody = (status: number, code: string, message: string, extra: Record<string, unknown> = {}) =>
  json({ statusCode: status, error: { code, message, ...extra } });

function thrown(fn: () => unknown): unknown {
  try {
    fn();
  } catch (error) {
    return error;
  }
  throw new Error('expected a throw');
}

describe('parseQueryBody: shapes', () => {
  it('reads an enveloped create answer with queryId', () => {
    expect(parseQueryBody('create', 201, envelope(201, { queryId: 'q-1', status: 'PROCESSING' }))).toEqual({
      queryId: 'q-1',
      status: 'PROCESSING',
      state: 'pending',
      terminal: false,
      shape: { id: '/body/queryId', status: '/body/status' },
    });
  });

  it('reads a bare body with `id`, and a numeric id as a string', () => {
    expect(parseQueryBody('create', 201, json({ id: 'abc', status: 'PENDING' }))).toMatchObject({
      queryId: 'abc',
      state: 'pending',
    });
    expect(parseQueryBody('create', 201, json({ id: 42, status: 'QUEUED' })).queryId).toBe('42');
    expect(parseQueryBody('create', 201, envelope(201, { id: 7 })).queryId).toBe('7');
  });

  it('prefers queryId over id', () => {
    expect(parseQueryBody('create', 201, json({ queryId: 'a', id: 'b' })).queryId).toBe('a');
  });

  it('does not unwrap a `body` field that is not an envelope', () => {
    // No numeric statusCode: `body` is just a field of the bare answer.
    const out = parseQueryBody('create', 201, json({ queryId: 'outer', status: 'DONE', body: { queryId: 'inner' } }));
    expect(out.queryId).toBe('outer');
    expect(out.state).toBe('completed');
  });

  it('a create without a status is pending; a get uses the queryId it asked for when the body omits it', () => {
    expect(parseQueryBody('create', 201, json({ queryId: 'q' }))).toEqual({
      queryId: 'q',
      status: '',
      state: 'pending',
      terminal: false,
      shape: { id: '/queryId' },
    });
    expect(parseQueryBody('get', 200, envelope(200, { status: 'PROCESSING' }), 'known-id').queryId).toBe('known-id');
  });
});

describe('parseQueryBody: statuses', () => {
  it.each(['PROCESSING', 'processing', 'Pending', 'queued'])('%s means keep polling', (status) => {
    const out = parseQueryBody('get', 200, envelope(200, { queryId: 'q', status }));
    expect(out).toMatchObject({ queryId: 'q', status, state: 'pending', terminal: false });
    expect('result' in out).toBe(false);
  });

  it.each(['COMPLETED', 'completed', 'Success', 'done'])('%s is completed with the whole body as result', (status) => {
    const body = { queryId: 'q', status, licensePlate: 'ABC1D23', result: { make: 'FIAT' } };
    const out = parseQueryBody('get', 200, envelope(200, body));
    expect(out.state).toBe('completed');
    expect(out.terminal).toBe(true);
    expect(out.status).toBe(status);
    expect(out.result).toEqual(body);
  });

  it.each(['FAILED', 'failed', 'Error'])('%s is failed, keeping the body as the reason', (status) => {
    const body = { queryId: 'q', status, error: { code: 'VEHICLE_NOT_FOUND' } };
    const out = parseQueryBody('get', 200, json(body));
    expect(out).toMatchObject({ queryId: 'q', status, state: 'failed', terminal: true, result: body });
  });

  it('an unknown status is never guessed: UNRECOGNISED_ANSWER, which holds the account (issue 34)', () => {
    const e = thrown(() => parseQueryBody('get', 200, json({ queryId: 'q', status: 'WAITING_FOR_DETRAN' })));
    expect(e).toBeInstanceOf(UnrecognisedAnswerError);
    expect(e).toMatchObject({
      code: 'UNRECOGNISED_ANSWER',
      why: 'unknown-state',
      state: 'WAITING_FOR_DETRAN',
      queryId: 'q',
    });
    expect(decide(e as UnrecognisedAnswerError)).toEqual({ action: 'hold-answer', refundCreate: false });
    expect(classifyStatus('WAITING_FOR_DETRAN')).toEqual({ state: 'pending', known: false });
    expect(classifyStatus('queued')).toEqual({ state: 'pending', known: true });
  });

  it.each([
    ['PROCESSANDO', 'pending'],
    ['Pendente', 'pending'],
    ['em andamento', 'pending'],
    ['EM-ANDAMENTO', 'pending'],
    ['Concluída', 'completed'],
    ['CONCLUIDO', 'completed'],
    ['finalizada', 'completed'],
    ['FINALIZADO', 'completed'],
    ['Sucesso', 'completed'],
    ['ERRO', 'failed'],
    ['falha', 'failed'],
  ])('Portuguese %s is %s (case and accents aside)', (status, state) => {
    expect(parseQueryBody('get', 200, envelope(200, { id: 'q', status }), 'q').state).toBe(state);
  });

  it('a get that says no state at all cannot be judged: held, not polled forever', () => {
    const e = thrown(() => parseQueryBody('get', 200, envelope(200, { licensePlate: 'ABC1234' }), 'q'));
    expect(e).toMatchObject({ kind: 'unrecognised', why: 'no-state', queryId: 'q' });
  });
});

describe('parseQueryBody: envelopes and id names', () => {
  it.each([
    [{ statusCode: 201, data: { queryId: 'q1', status: 'PROCESSING' } }, '/data/queryId'],
    [{ statusCode: 201, result: { query_id: 'q1', status: 'PENDENTE' } }, '/result/query_id'],
    [{ success: true, payload: { uuid: 'q1', situacao: 'PROCESSANDO' } }, '/payload/uuid'],
    [{ response: { data: { protocolo: 'q1', status: 'EM_FILA' } } }, '/response/data/protocolo'],
  ])('finds the id in %j', (answer, at) => {
    const out = parseQueryBody('create', 201, json(answer));
    expect(out.queryId).toBe('q1');
    expect(out.state).toBe('pending');
    expect(out.shape?.id).toBe(at);
  });

  it('a finished query keeps the object that holds its state as the result (its error inside)', () => {
    const answer = { statusCode: 200, data: { queryId: 'q', status: 'ERRO', error: { code: 'VEHICLE_NOT_FOUND' } } };
    expect(parseQueryBody('get', 200, json(answer), 'q').result).toEqual(answer.data);
  });

  it('the mapping reads what nothing built in does: pointers and added states', () => {
    const reader = answerReader({
      id: '/body/ticket',
      status: '/body/fase',
      result: '/body/veiculo',
      pending: ['etapa_1'],
      done: ['Etapa Final'],
      failed: ['ETAPA_ABORTADA'],
    });
    const created = parseQueryBody('create', 201, envelope(201, { ticket: 't-1', fase: 'ETAPA_1' }), undefined, reader);
    expect(created).toMatchObject({
      queryId: 't-1',
      state: 'pending',
      shape: { id: '/body/ticket', status: '/body/fase' },
    });
    const done = parseQueryBody(
      'get',
      200,
      envelope(200, { ticket: 't-1', fase: 'ETAPA_FINAL', veiculo: { uf: 'SP' } }),
      't-1',
      reader,
    );
    expect(done).toMatchObject({ state: 'completed', result: { uf: 'SP' } });
    const failed = parseQueryBody('get', 200, envelope(200, { ticket: 't-1', fase: 'etapa abortada' }), 't-1', reader);
    expect(failed.state).toBe('failed');
    // Without the mapping, the same answer holds the account: no id vqb can read.
    expect(
      thrown(() => parseQueryBody('create', 201, envelope(201, { ticket: 't-1', fase: 'ETAPA_1' }))),
    ).toMatchObject({
      kind: 'unrecognised',
      why: 'no-id',
    });
  });
});

describe('parseQueryBody: unusable answers', () => {
  it('no query id in a JSON answer: UNRECOGNISED_ANSWER keeping the answer; the plate is held, never failed', () => {
    const onCreate = thrown(() => parseQueryBody('create', 201, envelope(201, { status: 'PROCESSING' })));
    expect(onCreate).toBeInstanceOf(UnrecognisedAnswerError);
    expect(decide(onCreate as UnrecognisedAnswerError)).toEqual({ action: 'hold-answer', refundCreate: false });
    expect(onCreate).toMatchObject({ status: 201, code: 'UNRECOGNISED_ANSWER', why: 'no-id', operation: 'create' });
    expect((onCreate as UnrecognisedAnswerError).answer).toEqual({ statusCode: 201, body: { status: 'PROCESSING' } });
    expect((onCreate as Error).message).toMatch(/query id/);
  });

  it('an empty or non-scalar id is no id', () => {
    expect(thrown(() => parseQueryBody('create', 201, json({ queryId: '' })))).toBeInstanceOf(UnrecognisedAnswerError);
    expect(thrown(() => parseQueryBody('create', 201, json({ queryId: { x: 1 } })))).toBeInstanceOf(
      UnrecognisedAnswerError,
    );
  });

  it('non-JSON and non-object JSON: BadResponseError quoting a snippet', () => {
    const html = thrown(() => parseQueryBody('create', 200, '<html><body>Gateway login</body></html>'));
    expect(html).toBeInstanceOf(BadResponseError);
    expect((html as Error).message).toContain('not JSON');
    expect((html as Error).message).toContain('Gateway login');
    expect(thrown(() => parseQueryBody('get', 200, '{"statusCode":200,"body":{"queryId":"q"'))).toBeInstanceOf(
      BadResponseError,
    );
    expect(thrown(() => parseQueryBody('get', 200, '[1,2]'))).toBeInstanceOf(BadResponseError);
    expect(thrown(() => parseQueryBody('get', 200, ''))).toBeInstanceOf(BadResponseError);
  });
});

describe('errorFromResponse', () => {
  it('401 INVALID_API_KEY → InvalidKeyError, not retryable', () => {
    const e = errorFromResponse('create', 401, {}, errorBody(401, 'INVALID_API_KEY', 'Invalid API key.'), NOW);
    expect(e).toBeInstanceOf(InvalidKeyError);
    expect(e).toMatchObject({ code: 'INVALID_API_KEY', status: 401, kind: 'invalid-key', message: 'Invalid API key.' });
  });

  it('401 EXPIRED_API_KEY → ExpiredKeyError', () => {
    const e = errorFromResponse('get', 401, {}, errorBody(401, 'EXPIRED_API_KEY', 'API key expired.'), NOW);
    expect(e).toBeInstanceOf(ExpiredKeyError);
    expect(e).not.toBeInstanceOf(InvalidKeyError);
    expect(e).toMatchObject({ code: 'EXPIRED_API_KEY', status: 401, kind: 'expired-key' });
  });

  it('401 without a readable body is still a key problem', () => {
    expect(errorFromResponse('create', 401, {}, 'Unauthorized', NOW)).toBeInstanceOf(InvalidKeyError);
  });

  it('403 names the permission the operation needs', () => {
    const body = errorBody(403, 'INSUFFICIENT_PERMISSIONS', 'This API key lacks a permission.');
    const create = errorFromResponse('create', 403, {}, body, NOW);
    expect(create).toBeInstanceOf(PermissionError);
    expect(create).toMatchObject({
      operation: 'create',
      permission: 'Run vehicle queries',
      status: 403,
      kind: 'permission',
    });
    expect(create.message).toContain('Run vehicle queries');
    expect(create.message).toContain('This API key lacks a permission.');

    const get = errorFromResponse('get', 403, {}, body, NOW);
    expect(get).toMatchObject({ operation: 'get', permission: 'View queries already run' });
    expect(get.message).toContain('View queries already run');
    expect(get.message).not.toContain('Run vehicle queries');
  });

  it('429 → RateLimitedError with retryAfterMs from the best hint', () => {
    const body = errorBody(429, 'RATE_LIMIT_EXCEEDED', 'Rate limit exceeded. Try again in 2 seconds.', {
      retryAfter: 2,
      retryAfterMs: 1_250,
    });
    const e = errorFromResponse('create', 429, { 'retry-after': '2' }, body, NOW);
    expect(e).toBeInstanceOf(RateLimitedError);
    expect(e).toMatchObject({ status: 429, kind: 'rate-limited', retryAfterMs: 1_250, code: 'RATE_LIMIT_EXCEEDED' });

    const provider = errorFromResponse(
      'get',
      429,
      { 'retry-after': '60' },
      errorBody(429, 'RATE_LIMIT_EXCEEDED', 'Try again in 60 seconds.', { retryAfter: 60 }),
      NOW,
    );
    expect((provider as RateLimitedError).retryAfterMs).toBe(60_000);

    const bare = errorFromResponse('get', 429, {}, 'Too Many Requests', NOW);
    expect(bare).toBeInstanceOf(RateLimitedError);
    expect((bare as RateLimitedError).retryAfterMs).toBeUndefined();
  });

  it('500 JSON and 502/503 HTML → TransientError keeping the status', () => {
    const e500 = errorFromResponse(
      'create',
      500,
      {},
      errorBody(500, 'INTERNAL_SERVER_ERROR', 'Internal server error.'),
      NOW,
    );
    expect(e500).toBeInstanceOf(TransientError);
    expect(e500).toMatchObject({
      status: 500,
      code: 'HTTP_500',
      upstreamCode: 'INTERNAL_SERVER_ERROR',
      kind: 'transient',
    });

    const html =
      '<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1></center>\r\n</body>\r\n</html>\r\n';
    const e502 = errorFromResponse('get', 502, { 'content-type': 'text/html' }, html, NOW);
    expect(e502).toBeInstanceOf(TransientError);
    expect(e502).toMatchObject({ status: 502, code: 'HTTP_502', upstreamCode: undefined, kind: 'transient' });
    expect(e502.message).toContain('502 Bad Gateway');
    expect(e502.message).not.toMatch(/[\r\n]/);

    expect(errorFromResponse('get', 503, {}, '', NOW)).toMatchObject({ status: 503, kind: 'transient' });
    expect(errorFromResponse('get', 408, {}, '', NOW)).toBeInstanceOf(TransientError);
  });

  it('400 and 404 → PermanentError keeping the upstream code', () => {
    const bad = errorFromResponse(
      'create',
      400,
      {},
      errorBody(400, 'INVALID_PLATE', 'Invalid license plate "X".'),
      NOW,
    );
    expect(bad).toBeInstanceOf(PermanentError);
    expect(bad).toMatchObject({
      status: 400,
      code: 'INVALID_PLATE',
      upstreamCode: 'INVALID_PLATE',
      kind: 'permanent',
      message: 'Invalid license plate "X".',
    });

    const missing = errorFromResponse('get', 404, {}, errorBody(404, 'QUERY_NOT_FOUND', 'No query with id "x".'), NOW);
    expect(missing).toBeInstanceOf(PermanentError);
    expect(missing).toMatchObject({
      status: 404,
      code: 'QUERY_NOT_FOUND',
      upstreamCode: 'QUERY_NOT_FOUND',
      kind: 'permanent',
    });
  });

  it('an unknown 4xx code keeps its class: permanent, the code kept; without a code, HTTP_<status>', () => {
    const odd = errorFromResponse('create', 422, {}, errorBody(422, 'PLATE_BLOCKED_BY_COURT', 'Blocked.'), NOW);
    expect(odd).toBeInstanceOf(PermanentError);
    expect(odd).toMatchObject({
      status: 422,
      code: 'PLATE_BLOCKED_BY_COURT',
      upstreamCode: 'PLATE_BLOCKED_BY_COURT',
      kind: 'permanent',
    });

    const teapot = errorFromResponse('get', 418, {}, 'I am a teapot', NOW);
    expect(teapot).toMatchObject({ status: 418, code: 'HTTP_418', upstreamCode: undefined, message: 'I am a teapot' });
    expect(errorFromResponse('get', 410, {}, '', NOW).message).toBe('HTTP 410');
  });

  it('every result is an UpstreamError', () => {
    for (const status of [400, 401, 403, 404, 429, 500, 502]) {
      expect(errorFromResponse('get', status, {}, '', NOW)).toBeInstanceOf(UpstreamError);
    }
  });
});

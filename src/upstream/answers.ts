// Reading what an upstream answer says: where its query id and its state are, and what the state
// means. The contract leaves the bodies open, so vqb reads what is plainly there (a common
// envelope, a common id name, states in Portuguese or English, compared without case or accents)
// plus what the operator mapped (VQ_ANSWER_*, VQ_STATES_*). An answer it cannot read this way is
// never guessed at: the caller holds the account and says which setting would read it. Pure: no I/O.

export type QueryState = 'pending' | 'completed' | 'failed';

/** The operator's mapping: RFC 6901 pointers into the answer's body, and states added to the built-in lists. */
export interface AnswerMapping {
  id?: string;
  status?: string;
  result?: string;
  pending: readonly string[];
  done: readonly string[];
  failed: readonly string[];
}

export const NO_MAPPING: AnswerMapping = Object.freeze({ pending: [], done: [], failed: [] });

/** Where an answer's fields were found (pointers): what first contact keeps per account. */
export interface AnswerShape {
  id?: string;
  status?: string;
}

/** Why an answer could not be read. */
export type Unreadable = 'no-id' | 'no-state' | 'unknown-state';

export type Reading =
  | {
      ok: true;
      queryId: string;
      /** The state as the upstream wrote it ('' when absent). */
      status: string;
      state: QueryState;
      /** The finished query's result (the object holding its state, or VQ_ANSWER_RESULT); absent while pending. */
      result?: unknown;
      shape: AnswerShape;
    }
  | { ok: false; why: Unreadable; queryId?: string; status?: string; shape: AnswerShape };

/** Envelopes the answer may come in, looked into in this order (one level, then two). */
const ENVELOPES = ['body', 'data', 'result', 'payload', 'response', 'content', 'dados', 'resultado', 'retorno'];
/** Names of the query id, most specific first: a bare `id` is the last resort. */
const ID_NAMES = [
  'queryId',
  'query_id',
  'queryID',
  'consultaId',
  'idConsulta',
  'id_consulta',
  'protocolo',
  'protocol',
  'uuid',
  'id',
];
const STATUS_NAMES = ['status', 'state', 'situacao', 'estado', 'queryStatus', 'query_status', 'statusConsulta'];

const BUILT_IN: Record<QueryState, readonly string[]> = {
  pending: [
    'PROCESSING',
    'PENDING',
    'QUEUED',
    'RUNNING',
    'CREATED',
    'IN_PROGRESS',
    'WAITING',
    'PROCESSANDO',
    'PENDENTE',
    'EM_ANDAMENTO',
    'EM_PROCESSAMENTO',
    'AGUARDANDO',
    'EM_FILA',
    'CRIADA',
    'CRIADO',
    'RECEBIDA',
    'RECEBIDO',
  ],
  completed: [
    'COMPLETED',
    'COMPLETE',
    'SUCCESS',
    'SUCCEEDED',
    'DONE',
    'FINISHED',
    'CONCLUIDA',
    'CONCLUIDO',
    'FINALIZADA',
    'FINALIZADO',
    'SUCESSO',
    'PROCESSADA',
    'PROCESSADO',
  ],
  failed: [
    'FAILED',
    'FAILURE',
    'ERROR',
    'REJECTED',
    'CANCELLED',
    'CANCELED',
    'ERRO',
    'FALHA',
    'FALHOU',
    'REJEITADA',
    'REJEITADO',
    'CANCELADA',
    'CANCELADO',
  ],
};

/** `Concluída`, `concluida ` and `CONCLUIDA` are one state; `em andamento` and `EM-ANDAMENTO` too. */
export function normalState(text: string): string {
  return text
    .normalize('NFD')
    .replace(/\p{M}/gu, '')
    .trim()
    .toUpperCase()
    .replace(/[\s-]+/g, '_');
}

/** The three lists in force: the built-in ones plus the mapping's (compiled once per mapping). */
export class StateLists {
  readonly #lists: [QueryState, Set<string>][];

  constructor(mapping: AnswerMapping = NO_MAPPING) {
    const of = (state: QueryState, extra: readonly string[]) =>
      [state, new Set([...extra, ...BUILT_IN[state]].map(normalState))] as [QueryState, Set<string>];
    // The operator's words first: a state they list as done is done, whatever a built-in list says.
    const mine: [QueryState, readonly string[]][] = [
      ['completed', mapping.done],
      ['failed', mapping.failed],
      ['pending', mapping.pending],
    ];
    this.#lists = [
      ...mine.map(([s, extra]) => [s, new Set(extra.map(normalState))] as [QueryState, Set<string>]),
      of('completed', []),
      of('failed', []),
      of('pending', []),
    ];
  }

  classify(status: string): QueryState | undefined {
    const s = normalState(status);
    for (const [state, set] of this.#lists) if (set.has(s)) return state;
    return undefined;
  }
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** RFC 6901: `/a/b~1c/0` → a → "b/c" → 0. */
export function pointerGet(value: unknown, pointer: string): unknown {
  if (pointer === '') return value;
  let at = value;
  for (const raw of pointer.slice(1).split('/')) {
    const token = raw.replaceAll('~1', '/').replaceAll('~0', '~');
    if (Array.isArray(at) && /^(0|[1-9]\d*)$/.test(token)) at = at[Number(token)];
    else if (isObject(at) && Object.hasOwn(at, token)) at = at[token];
    else return undefined;
  }
  return at;
}

/** `/body/fase` → `/body`; `/fase` → `` (the whole body). */
function parentOf(pointer: string): string {
  return pointer.slice(0, Math.max(0, pointer.lastIndexOf('/')));
}

/** A pointer is empty (the whole body) or starts with `/`. */
export function isPointer(text: string): boolean {
  return text === '' || text.startsWith('/');
}

function escapeToken(token: string): string {
  return token.replaceAll('~', '~0').replaceAll('/', '~1');
}

/** The objects an id or a state may sit in: the answer, then its envelopes one and two levels down. */
function containers(root: Record<string, unknown>): { at: string; value: Record<string, unknown> }[] {
  const out = [{ at: '', value: root }];
  for (let i = 0; i < out.length && i < 12; i++) {
    const { at, value } = out[i]!;
    if (at.split('/').length > 2) continue;
    for (const name of ENVELOPES) {
      const inner = value[name];
      if (isObject(inner)) out.push({ at: `${at}/${escapeToken(name)}`, value: inner });
    }
  }
  return out;
}

function scalarText(value: unknown): string | undefined {
  if (typeof value === 'string') return value;
  if (typeof value === 'number' && Number.isFinite(value)) return String(value);
  return undefined;
}

function findIn(
  places: { at: string; value: Record<string, unknown> }[],
  names: readonly string[],
): { at: string; text: string; place: string } | undefined {
  for (const name of names)
    for (const { at, value } of places) {
      const text = scalarText(value[name]);
      if (text !== undefined && text !== '') return { at: `${at}/${escapeToken(name)}`, text, place: at };
    }
  return undefined;
}

/**
 * Reads one 2xx answer (parsed JSON). `knownQueryId`: a get's own id, used when the answer does
 * not repeat it. A create without a state is a query that has started; a get must say its state.
 */
export function readAnswer(
  operation: 'create' | 'get',
  value: unknown,
  mapping: AnswerMapping,
  lists: StateLists,
  knownQueryId?: string,
): Reading {
  const root = isObject(value) ? value : {};
  const places = containers(root);
  const shape: AnswerShape = {};
  let queryId: string | undefined;
  let place: string | undefined;
  if (mapping.id !== undefined) {
    queryId = scalarText(pointerGet(value, mapping.id)) || undefined;
    if (queryId !== undefined) shape.id = mapping.id;
  } else {
    const found = findIn(places, ID_NAMES);
    if (found) {
      queryId = found.text;
      place = found.place;
      shape.id = found.at;
    }
  }
  let status: string | undefined;
  let statusPlace: string | undefined;
  if (mapping.status !== undefined) {
    status = scalarText(pointerGet(value, mapping.status));
    if (status !== undefined) shape.status = mapping.status;
  } else {
    // The state beside the id when there is one; else wherever it is plainly there.
    const near = place === undefined ? [] : places.filter((p) => p.at === place);
    const found = findIn(near, STATUS_NAMES) ?? findIn(places, STATUS_NAMES);
    if (found) {
      status = found.text;
      statusPlace = found.place;
      shape.status = found.at;
    }
  }
  const id = queryId ?? (operation === 'get' ? knownQueryId : undefined);
  if (id === undefined) return { ok: false, why: 'no-id', ...(status !== undefined ? { status } : {}), shape };
  if (status === undefined || status === '') {
    if (operation === 'create') return { ok: true, queryId: id, status: '', state: 'pending', shape };
    return { ok: false, why: 'no-state', queryId: id, shape };
  }
  const state = lists.classify(status);
  if (state === undefined) return { ok: false, why: 'unknown-state', queryId: id, status, shape };
  if (state === 'pending') return { ok: true, queryId: id, status, state, shape };
  // The object holding the state (or the id): the mapped pointer's parent when it was mapped.
  const holder = place ?? statusPlace ?? parentOf(shape.status ?? shape.id ?? '');
  const result = mapping.result !== undefined ? pointerGet(value, mapping.result) : pointerGet(value, holder);
  return { ok: true, queryId: id, status, state, result: result ?? value, shape };
}

/** Field names whose values are never kept or shown. */
const SECRET_NAME = /(api[-_]?key|token|secret|password|passwd|senha|authorization|cookie)/i;

/**
 * Redacts secret-looking fields (and `alsoHide`, the key) and cuts the answer to about `maxBytes`
 * of JSON, still JSON.
 */
export function keepable(value: unknown, maxBytes = 4_096, alsoHide?: string): unknown {
  const hide = (text: string) => (alsoHide ? text.split(alsoHide).join('[redacted]') : text);
  const prune = (v: unknown, depth: number, maxString: number, maxItems: number): unknown => {
    if (typeof v === 'string') return hide(v.length > maxString ? `${v.slice(0, maxString)}…` : v);
    if (v === null || typeof v !== 'object') return v;
    if (depth <= 0) return '…';
    if (Array.isArray(v)) {
      const items = v.slice(0, maxItems).map((x) => prune(x, depth - 1, maxString, maxItems));
      return v.length > maxItems ? [...items, `… ${v.length - maxItems} more`] : items;
    }
    const out: Record<string, unknown> = {};
    const entries = Object.entries(v);
    for (const [k, x] of entries.slice(0, maxItems * 4))
      out[hide(k)] = SECRET_NAME.test(k) ? '[redacted]' : prune(x, depth - 1, maxString, maxItems);
    if (entries.length > maxItems * 4) out['…'] = `${entries.length - maxItems * 4} more fields`;
    return out;
  };
  for (const [depth, maxString, maxItems] of [
    [12, 2_000, 200],
    [6, 200, 20],
    [4, 64, 8],
    [2, 32, 4],
  ] as const) {
    const kept = prune(value, depth, maxString, maxItems);
    if (JSON.stringify(kept).length <= maxBytes) return kept;
  }
  return { cut: hide(JSON.stringify(value)).slice(0, maxBytes - 20) };
}

/** Every scalar field of the answer as `pointer = value`, for a person to read. */
export function fieldList(value: unknown, max = 24): string[] {
  const out: string[] = [];
  const walk = (v: unknown, at: string) => {
    if (out.length >= max) return;
    if (isObject(v)) for (const [k, x] of Object.entries(v)) walk(x, `${at}/${escapeToken(k)}`);
    else if (Array.isArray(v)) for (const [i, x] of v.slice(0, 3).entries()) walk(x, `${at}/${i}`);
    else out.push(`${at || '(the whole body)'} = ${JSON.stringify(v)}`);
  };
  walk(value, '');
  return out;
}

/**
 * A field that looks like an id (a token with a digit) or a state (named like one, or an
 * upper-case word), for the suggestion.
 */
function guess(value: unknown, kind: 'id' | 'state'): string | undefined {
  const named: string[] = [];
  const looking: string[] = [];
  const walk = (v: unknown, at: string, key: string) => {
    if (isObject(v)) for (const [k, x] of Object.entries(v)) walk(x, `${at}/${escapeToken(k)}`, k);
    else if (typeof v === 'string' || typeof v === 'number') {
      const text = String(v);
      if (kind === 'state') {
        if (/stat|fase|phase|situa|etapa|stage|estado/i.test(key) && /[A-Za-z]/.test(text)) named.push(at);
        else if (/^[A-Z][A-Z_ ]{2,40}$/.test(text)) looking.push(at);
      } else if (/^[A-Za-z0-9_.:-]{6,}$/.test(text) && /\d/.test(text) && !/(date|at|time|em)$/i.test(key)) {
        if (/id|ticket|protoc|numero|number|codigo|code|ref/i.test(key)) named.push(at);
        else looking.push(at);
      }
    }
  };
  walk(value, '', '');
  return named[0] ?? looking[0];
}

/** What an unreadable answer showed and which settings would read it: the account's pause message. */
export function describeUnreadable(
  operation: 'create' | 'get',
  why: Unreadable,
  answer: unknown,
  status: string | undefined,
  accountId: string,
): string {
  const what =
    why === 'no-id'
      ? `the upstream's answer to a ${operation} has no query id vqb can read (the query is paid: ` +
        `it waits, and is not created again)`
      : why === 'no-state'
        ? `the upstream's answer to a ${operation === 'get' ? 'poll' : operation} has no state vqb can read`
        : `the upstream answered the state ${JSON.stringify(status)}, which is in none of vqb's lists`;
  const fields = fieldList(answer);
  const idAt = why === 'no-id' ? (guess(answer, 'id') ?? '/…') : undefined;
  const guessed = why !== 'unknown-state' ? guess(answer, 'state') : undefined;
  // A state under a name vqb reads by itself needs no pointer, only its word in a list.
  const stateAt = guessed !== undefined && !STATUS_NAMES.some((n) => guessed.endsWith(`/${n}`)) ? guessed : undefined;
  const sets: string[] = [];
  if (idAt !== undefined) sets.push(`VQ_ANSWER_ID=${idAt}`);
  if (stateAt !== undefined) sets.push(`VQ_ANSWER_STATUS=${stateAt}`);
  const stateText = status ?? (guessed !== undefined ? scalarText(pointerGet(answer, guessed)) : undefined);
  const where =
    accountId === 'default'
      ? ''
      : ` (account ${accountId}: answerId, answerStatus, statesPending, statesDone or statesFailed ` +
        `in the accounts file)`;
  // A state the built-in lists know needs no setting.
  const known = stateText !== undefined && new StateLists().classify(stateText) !== undefined;
  if (!known)
    sets.push(
      `VQ_STATES_PENDING, VQ_STATES_DONE or VQ_STATES_FAILED naming ` +
        `${stateText ? JSON.stringify(stateText) : 'its states'}`,
    );
  return [
    `UNRECOGNISED_ANSWER: ${what}.`,
    `Its fields: ${fields.join(', ') || '(none)'}.`,
    `Settings that would read it${where}: ${sets.join(', ')} (VQ_ANSWER_* are JSON Pointers into ` +
      `the answer's body; VQ_ANSWER_RESULT where the result is); then run the same command again.`,
  ].join(' ');
}

/** An answer vqb could not read, kept with its plate (redacted, cut) to be read again under new settings. */
export interface KeptAnswer {
  operation: 'create' | 'get';
  /** The HTTP status it came with. */
  status: number;
  answer: unknown;
  why: Unreadable;
  /** Epoch ms it came. */
  at: number;
}

// The shapes the simulator answers in (`vqb simulate --answers <shape>`): the contract leaves the
// bodies open, so tests meet more than the provider's documented one.
//   default    {statusCode, body: {queryId, status: PROCESSING|COMPLETED|FAILED, …}} (--no-envelope, --id-field)
//   pt         {statusCode, body: {id, status: PROCESSANDO|CONCLUIDA|ERRO, …}}
//   data       {statusCode, data: {queryId, status, …}}: everything one level down in `data`
//   unknown    {statusCode, body: {ticket, fase: ETAPA_1|ETAPA_FINAL|ETAPA_ABORTADA, …}}: an id
//              under a name vqb does not know, states it does not know
//   new-state  as default, with a pending query's state EM_ANALISE_DETRAN (an upstream that
//              changed mid-batch: switch to it with --answers-after or PATCH /__admin/config)
import type { QueryStatus } from './lifecycle.js';

export const ANSWER_SHAPES = ['default', 'pt', 'data', 'unknown', 'new-state'] as const;
export type AnswerShapeName = (typeof ANSWER_SHAPES)[number];

const STATES: Record<'pt' | 'unknown' | 'new-state', Record<QueryStatus, string>> = {
  pt: { PROCESSING: 'PROCESSANDO', COMPLETED: 'CONCLUIDA', FAILED: 'ERRO' },
  unknown: { PROCESSING: 'ETAPA_1', COMPLETED: 'ETAPA_FINAL', FAILED: 'ETAPA_ABORTADA' },
  'new-state': { PROCESSING: 'EM_ANALISE_DETRAN', COMPLETED: 'COMPLETED', FAILED: 'FAILED' },
};

export interface QueryView {
  id: string;
  status: QueryStatus;
  /** Everything else the answer says (plate, times, result, error). */
  fields: Record<string, unknown>;
}

/** The whole success body of a create or a get, in `shape`. */
export function shapeAnswer(
  shape: AnswerShapeName,
  httpStatus: number,
  view: QueryView,
  defaults: { envelope: boolean; idField: 'queryId' | 'id' },
): Record<string, unknown> {
  switch (shape) {
    case 'default': {
      const body = { [defaults.idField]: view.id, status: view.status, ...view.fields };
      return defaults.envelope ? { statusCode: httpStatus, body } : body;
    }
    case 'pt':
      return { statusCode: httpStatus, body: { id: view.id, status: STATES.pt[view.status], ...view.fields } };
    case 'data':
      return { statusCode: httpStatus, data: { queryId: view.id, status: view.status, ...view.fields } };
    case 'unknown':
      return { statusCode: httpStatus, body: { ticket: view.id, fase: STATES.unknown[view.status], ...view.fields } };
    case 'new-state': {
      const body = { [defaults.idField]: view.id, status: STATES['new-state'][view.status], ...view.fields };
      return defaults.envelope ? { statusCode: httpStatus, body } : body;
    }
  }
}

/** `N:shape`: the answers switch to `shape` once N queries were created. */
export function parseAnswersAfter(text: string): { creates: number; shape: AnswerShapeName } | undefined {
  const m = /^(\d+):([a-z-]+)$/.exec(text.trim());
  if (!m || !(ANSWER_SHAPES as readonly string[]).includes(m[2]!)) return undefined;
  return { creates: Number(m[1]), shape: m[2] as AnswerShapeName };
}

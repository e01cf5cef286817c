// The words vqb says to people outside the console's pages, in English and Brazilian Portuguese:
// why a row was rejected, why a plate failed, the exports' headers and the run's report of them.
// One catalogue: the console's dictionaries (console/i18n.ts) take these entries too, so a reject
// reads the same in a download, a spreadsheet and a terminal. The language is VQ_LANG, else the
// locale (LC_ALL, LC_MESSAGES, LANG) when it names pt or en, else pt-BR: the people who read
// these are operations teams in Brazil.

export const LANGS = ['pt-BR', 'en'] as const;
export type Lang = (typeof LANGS)[number];

/** `pt`, `pt-BR`, `pt_BR.UTF-8` → pt-BR; `en`, `en_US.UTF-8` → en; anything else (C, POSIX) → undefined. */
export function langOf(text: string | undefined): Lang | undefined {
  const tag = (text ?? '').trim().toLowerCase();
  if (/^pt(?:$|[-_.@])/.test(tag)) return 'pt-BR';
  if (/^en(?:$|[-_.@])/.test(tag)) return 'en';
  return undefined;
}

/** The language of a process: VQ_LANG's, else the locale's (LC_ALL wins, as in POSIX), else pt-BR. */
export function processLang(vqLang: Lang | undefined, env: Record<string, string | undefined>): Lang {
  if (vqLang !== undefined) return vqLang;
  const locale = [env.LC_ALL, env.LC_MESSAGES, env.LANG].find((v) => v !== undefined && v !== '');
  return langOf(locale) ?? 'pt-BR';
}

export const en = {
  // Why a row was rejected: the `reason` column keeps the code (EMPTY, BAD_LENGTH, BAD_FORMAT).
  'reject.EMPTY': 'no letters or digits',
  'reject.BAD_LENGTH': 'plates have 7 characters, this has {n}',
  'reject.BAD_FORMAT': 'expected ABC1234 or ABC1D23',
  // Why a plate failed, by its code; a code not here keeps the text stored with it (the upstream's own).
  // An English export shows the stored text (it is English already, and may name the plate); these
  // say what the code means, and the Portuguese ones are written in its place.
  'rowError.VEHICLE_NOT_FOUND': 'no vehicle found for this plate',
  'rowError.QUERY_FAILED': 'the upstream ended the query without a result',
  'rowError.POLL_TIMEOUT': 'the query did not finish within the time vqb waits for it (VQ_POLL_DEADLINE)',
  'rowError.CREATE_UNCERTAIN':
    'a query was sent and its answer was lost; not sent again (VQ_RECREATE_UNCERTAIN=false): ' +
    'check the upstream for this plate',
  'rowError.JOB_STALLED': 'the worker handling this plate stopped too often',
  'rowError.UNRECOGNISED_ANSWER': 'the upstream answered in a shape vqb cannot read',
  'rowError.BAD_RESPONSE': 'the upstream answered with a body vqb cannot use',
  'rowError.INVALID_API_KEY': 'the upstream refused the API key',
  'rowError.EXPIRED_API_KEY': 'the API key has expired',
  'rowError.INSUFFICIENT_PERMISSIONS': 'the API key lacks a permission this look-up needs',
  // A row's outcome, as the readable export's column says it.
  'export.status.done': 'done',
  'export.status.failed': 'failed',
  'export.status.cancelled': 'cancelled (never sent)',
  'export.status.rejected': 'rejected',
  'export.status.duplicate': 'duplicate',
  'export.status.pending': 'pending',
  // The readable export's headers (docs/inputs-and-exports.md maps each to its raw column).
  'export.col.plate': 'Plate',
  'export.col.outcome': 'Outcome',
  'export.col.message': 'Message',
  'export.col.row': 'Row',
  'export.col.input': 'Input',
  'export.col.reason': 'Reason',
  'export.col.normalized': 'Normalised plate',
  'export.col.queryId': 'Query id',
  'export.col.errorCode': 'Error code',
  'export.col.possibleDuplicate': 'Possibly charged twice',
  'export.col.duplicateOf': 'Duplicate of row',
  'export.col.sameVehicleAs': 'Same vehicle as',
  'export.col.reused': 'Reused',
  'export.col.enqueuedAt': 'Queued at',
  'export.col.createdAt': 'Sent at',
  'export.col.finishedAt': 'Finished at',
  'export.col.requests': 'Requests',
  'export.col.key': 'Key (account)',
  'export.field.brand': 'Make',
  'export.field.model': 'Model',
  'export.field.year': 'Year made',
  'export.field.modelYear': 'Model year',
  'export.field.color': 'Colour',
  'export.field.fuel': 'Fuel',
  'export.field.city': 'City',
  'export.field.uf': 'State',
  'export.field.chassis': 'Chassis (VIN)',
  'export.field.renavam': 'Renavam',
  'export.field.situation': 'Vehicle status',
  'export.field.restrictions': 'Restrictions',
  'export.sheet.results': 'results',
  'export.sheet.rejects': 'rejects',
  // The run's report of its rejects and failures, after the exports.
  'run.rejected.one': '1 row rejected:',
  'run.rejected.other': '{n} rows rejected:',
  'run.failed.one': '1 plate failed:',
  'run.failed.other': '{n} plates failed:',
  'run.problem': '  row {row} ({input}): {message}',
  'run.more': '  and {n} more, in {file}',
} as const;

export type WordKey = keyof typeof en;

export const ptBR: Record<WordKey, string> = {
  'reject.EMPTY': 'sem letras nem números',
  'reject.BAD_LENGTH': 'placas têm 7 caracteres; esta tem {n}',
  'reject.BAD_FORMAT': 'esperado ABC1234 ou ABC1D23',
  'rowError.VEHICLE_NOT_FOUND': 'nenhum veículo encontrado para esta placa',
  'rowError.QUERY_FAILED': 'o provedor encerrou a consulta sem resultado',
  'rowError.POLL_TIMEOUT': 'a consulta não terminou no tempo que o vqb espera por ela (VQ_POLL_DEADLINE)',
  'rowError.CREATE_UNCERTAIN':
    'uma consulta foi enviada e a resposta se perdeu; não foi reenviada (VQ_RECREATE_UNCERTAIN=false): ' +
    'confira esta placa no provedor',
  'rowError.JOB_STALLED': 'o processo que tratava esta placa parou vezes demais',
  'rowError.UNRECOGNISED_ANSWER': 'o provedor respondeu num formato que o vqb não sabe ler',
  'rowError.BAD_RESPONSE': 'o provedor respondeu com um conteúdo que o vqb não consegue usar',
  'rowError.INVALID_API_KEY': 'o provedor recusou a chave de API',
  'rowError.EXPIRED_API_KEY': 'a chave de API expirou',
  'rowError.INSUFFICIENT_PERMISSIONS': 'falta à chave de API uma permissão que esta consulta exige',
  'export.status.done': 'concluída',
  'export.status.failed': 'falhou',
  'export.status.cancelled': 'cancelada (não enviada)',
  'export.status.rejected': 'rejeitada',
  'export.status.duplicate': 'duplicada',
  'export.status.pending': 'pendente',
  'export.col.plate': 'Placa',
  'export.col.outcome': 'Situação da consulta',
  'export.col.message': 'Mensagem',
  'export.col.row': 'Linha',
  'export.col.input': 'Entrada',
  'export.col.reason': 'Motivo',
  'export.col.normalized': 'Placa normalizada',
  'export.col.queryId': 'ID da consulta',
  'export.col.errorCode': 'Código do erro',
  'export.col.possibleDuplicate': 'Possível cobrança dupla',
  'export.col.duplicateOf': 'Duplicada da linha',
  'export.col.sameVehicleAs': 'Mesmo veículo que',
  'export.col.reused': 'Reaproveitada',
  'export.col.enqueuedAt': 'Enfileirada em',
  'export.col.createdAt': 'Enviada em',
  'export.col.finishedAt': 'Concluída em',
  'export.col.requests': 'Requisições',
  'export.col.key': 'Chave (conta)',
  'export.field.brand': 'Marca',
  'export.field.model': 'Modelo',
  'export.field.year': 'Ano de fabricação',
  'export.field.modelYear': 'Ano do modelo',
  'export.field.color': 'Cor',
  'export.field.fuel': 'Combustível',
  'export.field.city': 'Município',
  'export.field.uf': 'UF',
  'export.field.chassis': 'Chassi',
  'export.field.renavam': 'Renavam',
  'export.field.situation': 'Situação do veículo',
  'export.field.restrictions': 'Restrições',
  'export.sheet.results': 'resultados',
  'export.sheet.rejects': 'rejeitadas',
  'run.rejected.one': '1 linha rejeitada:',
  'run.rejected.other': '{n} linhas rejeitadas:',
  'run.failed.one': '1 placa falhou:',
  'run.failed.other': '{n} placas falharam:',
  'run.problem': '  linha {row} ({input}): {message}',
  'run.more': '  e mais {n}, em {file}',
};

export const WORDS: Record<Lang, Record<WordKey, string>> = { en, 'pt-BR': ptBR };

export type Words = (key: WordKey, vars?: Record<string, string | number>) => string;

/** `{name}` filled from vars; a name vars lacks stays as written. */
export function fill(text: string, vars?: Record<string, string | number>): string {
  return text.replace(/\{(\w+)\}/g, (whole, name: string) => (vars && name in vars ? String(vars[name]) : whole));
}

export function wordsFor(lang: Lang): Words {
  const dictionary = WORDS[lang];
  return (key, vars) => fill(dictionary[key], vars);
}

/** A key of the catalogue (for codes read from data: `rowError.${code}`). */
export function isWordKey(key: string): key is WordKey {
  return Object.hasOwn(en, key);
}

/** Why a row was rejected, in `lang`; a code without words keeps the stored text. */
export function rejectText(reason: string, stored: string, lang: Lang): string {
  const key = `reject.${reason}`;
  if (!isWordKey(key)) return stored;
  // BAD_LENGTH's stored text ends with the length it found.
  return wordsFor(lang)(key, { n: /(\d+)\s*$/.exec(stored)?.[1] ?? '?' });
}

/** Why a plate failed, in `lang`; a code without words (the upstream's own) keeps the stored text. */
export function rowErrorText(code: string, stored: string, lang: Lang): string {
  const key = `rowError.${code}`;
  return isWordKey(key) ? wordsFor(lang)(key) : stored;
}

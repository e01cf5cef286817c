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
  // Why an account's line waits, and a deadline's judgement (presenters/waits.ts): the console, the API and the CLI
  // (their `message`) read these, so the English a script or a doc quotes is the console's English too.
  'wait.paused': 'paused',
  'wait.upstream_unreachable': 'upstream unreachable',
  'wait.budget': 'spending cap reached',
  'wait.quota': 'upstream quota used up',
  'wait.rate_limit': 'rate limited',
  'wait.redis_down': 'Redis unreachable',
  'wait.redis_full': 'Redis full',
  'deadline.feasible': 'deadline: feasible',
  'deadline.notFeasible': 'deadline: not feasible',
  'deadline.unknown': 'deadline: unknown',
  'deadline.met': 'deadline: met',
  'deadline.missed': 'deadline: missed',
  'deadline.due': 'due {at} ({relative})',
  'deadline.finished': 'finished {at}',
  'deadline.range': 'finishes in {low}–{high}',
  'deadline.ahead': 'after {n} plates ahead of it on the key',
  'deadline.onTime': 'on time by {span}',
  'deadline.late': 'late by {span}',
  'deadline.cost': 'costs {cost}',
  'deadline.noRate': 'no rate known yet: it is known after the account’s first answers from the upstream',
  'deadline.keysHold': 'no key serves it now: every key of its pool holds ({keys}); it is known when one serves again',
  // A pause's why. A key's (and any coded) pause in English is the message stored with it: vqb's own
  // English, with the upstream's words and what to do, naming the key file and the resume command
  // (workers/actions.ts adviceFor); the other languages say what the code means in its place.
  'pause.console': 'by an operator, in the console',
  'pause.operator': 'by an operator (vqb pause)',
  'pause.operatorSaid': 'by an operator: “{reason}”',
  'pause.INVALID_API_KEY': '{message}',
  'pause.EXPIRED_API_KEY': '{message}',
  'pause.INSUFFICIENT_PERMISSIONS': '{message}',
  'pause.UNRECOGNISED_ANSWER': '{message}',
  'pause.other': '{message}',
  // The whole sentence of each wait; {label} is the reason's wait.* word, {resume} the command that
  // resumes the account; of an outage both {ago} ("3 min ago") and {lasted} ("3 min") are given, each
  // language takes the one it reads best. The CLI, the API and the console's English read these same
  // sentences; only how times are written differs (presenters/waits.ts WordsCtx.times).
  'waitd.paused': '{label}: {why}',
  'waitd.pausedBare': '{label} (run {resume})',
  'waitd.upstream_unreachable': '{label} since {since} ({lasted}): {reason}; retrying (attempt {attempts})',
  'waitd.reachableAgain': 'upstream reachable again since {at} ({ago}; it was unreachable {lasted}: {reason})',
  'waitd.reachableAgainBare': 'upstream reachable again since {at} ({ago}; it was unreachable {lasted})',
  'waitd.budget': 'creates wait: the spending cap is reached until {until} (raise it with `vqb budget`; polls go on)',
  'waitd.budget.day':
    'creates wait: the spending cap per day is reached until {until} (raise it with `vqb budget`; polls go on)',
  'waitd.budget.month':
    'creates wait: the spending cap per month is reached until {until} (raise it with `vqb budget`; polls go on)',
  'waitd.budgetBatch':
    'creates wait: the batch reached its cap of {max} creates (raise it with `{raise}`; ' + 'polls go on)',
  'waitd.quota': 'waiting for the upstream quota to reset at {until}',
  'waitd.rate_limit': '{label} until {until}',
  'waitd.redis_down':
    'waiting for Redis: the connection is lost; paid results are kept in memory until they are stored',
  'waitd.redis_full':
    'waiting for Redis: it is full (maxmemory reached); raise maxmemory or free memory, work resumes by itself',
  'reach.connection refused': 'connection refused',
  'reach.connection timed out': 'connection timed out',
  'reach.connection reset': 'connection reset',
  'reach.no answer in time': 'no answer in time',
  'reach.the answer stalled': 'the answer stalled',
  'reach.network error': 'network error',
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
  // Por que a fila de uma conta espera, e o juízo de um prazo (presenters/waits.ts).
  'wait.paused': 'pausada',
  'wait.upstream_unreachable': 'fornecedor fora do ar',
  'wait.budget': 'limite de gastos atingido',
  'wait.quota': 'cota do fornecedor esgotada',
  'wait.rate_limit': 'limite de requisições',
  'wait.redis_down': 'Redis fora do ar',
  'wait.redis_full': 'Redis cheio',
  'deadline.feasible': 'prazo: viável',
  'deadline.notFeasible': 'prazo: inviável',
  'deadline.unknown': 'prazo: ainda não se sabe',
  'deadline.met': 'prazo: cumprido',
  'deadline.missed': 'prazo: perdido',
  'deadline.due': 'até {at} ({relative})',
  'deadline.finished': 'concluído em {at}',
  'deadline.range': 'termina em {low}–{high}',
  'deadline.ahead': 'depois de {n} placas à frente dele na chave',
  'deadline.onTime': 'no prazo, com folga de {span}',
  'deadline.late': 'atrasado em {span}',
  'deadline.cost': 'custa {cost}',
  'deadline.noRate': 'nenhuma taxa conhecida ainda: ela se conhece com as primeiras respostas do fornecedor à conta',
  'deadline.keysHold':
    'nenhuma chave o atende agora: todas as chaves do seu grupo estão retidas ({keys}); ' +
    'volta a ser conhecida quando uma voltar a atender',
  'pause.console': 'por um operador, no console',
  'pause.operator': 'por um operador (vqb pause)',
  'pause.operatorSaid': 'por um operador: “{reason}”',
  'pause.INVALID_API_KEY':
    'a chave da API não é válida: coloque uma chave válida no arquivo da chave da conta e retome a conta',
  'pause.EXPIRED_API_KEY': 'a chave da API expirou: coloque a nova chave no arquivo da chave da conta e retome a conta',
  'pause.INSUFFICIENT_PERMISSIONS':
    'falta à chave da API uma permissão que esta consulta exige: peça-a ao fornecedor e retome a conta',
  // What was seen and which setting reads it are the answer's own words (field names, pointers):
  // shown as vqb wrote them.
  'pause.UNRECOGNISED_ANSWER':
    'o fornecedor respondeu num formato que o vqb não sabe ler; as consultas pagas ficam guardadas e ' +
    'não são criadas de novo. O que se viu e o ajuste que o lê: {message}',
  'pause.other': 'uma falha da chave ({code}): corrija a chave e retome a conta',
  'waitd.paused': '{label}: {why}',
  'waitd.pausedBare': '{label} (retome com {resume})',
  'waitd.upstream_unreachable': '{label}: desde {since} ({ago}): {reason}; tentando de novo (tentativa {attempts})',
  'waitd.reachableAgain': 'fornecedor de volta desde {at} ({ago}; ficou fora do ar por {lasted}: {reason})',
  'waitd.reachableAgainBare': 'fornecedor de volta desde {at} ({ago}; ficou fora do ar por {lasted})',
  'waitd.budget': '{label}: as criações esperam até {until}; as consultas seguem (aumente o limite com vqb budget)',
  'waitd.budget.day':
    'limite de gastos por dia atingido: as criações esperam até {until}; as consultas seguem ' +
    '(aumente o limite com vqb budget)',
  'waitd.budget.month':
    'limite de gastos por mês atingido: as criações esperam até {until}; as consultas seguem ' +
    '(aumente o limite com vqb budget)',
  'waitd.budgetBatch':
    '{label}: as criações esperam no limite do próprio lote, de {max} criações; as consultas seguem ' +
    '(aumente-o com {raise})',
  'waitd.quota': '{label}: até {until}',
  'waitd.rate_limit': '{label}: até {until}',
  'waitd.redis_down': '{label}: a conexão caiu; os resultados pagos ficam na memória até serem gravados',
  'waitd.redis_full': '{label}: o Redis recusa gravações (maxmemory); o trabalho volta sozinho quando houver espaço',
  'reach.connection refused': 'conexão recusada',
  'reach.connection timed out': 'tempo de conexão esgotado',
  'reach.connection reset': 'conexão interrompida',
  'reach.no answer in time': 'sem resposta a tempo',
  'reach.the answer stalled': 'a resposta parou no meio',
  'reach.network error': 'erro de rede',
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

/** Numbers and durations as the language writes them. */
/** Built once: a NumberFormat costs ~60 µs to construct, ~0.6 µs to use (a list page formats hundreds). */
const NUMBER_FORMATS: Record<Lang, Intl.NumberFormat> = {
  en: new Intl.NumberFormat('en'),
  'pt-BR': new Intl.NumberFormat('pt-BR'),
};

export function formatNumber(lang: Lang, n: number): string {
  return NUMBER_FORMATS[lang].format(n);
}

export function formatSeconds(seconds: number, lang: Lang = 'pt-BR'): string {
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${String(s % 60).padStart(2, '0')} s`;
  const h = Math.floor(s / 3600);
  if (h < 48) return `${h} h ${String(Math.floor((s % 3600) / 60)).padStart(2, '0')} min`;
  const days = Math.floor(h / 24);
  return `${days} ${lang === 'en' ? 'days' : 'dias'} ${h % 24} h`;
}

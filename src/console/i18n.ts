// The console's words in English and Brazilian Portuguese. The language is the one the operator
// chose (the `vqb_lang` cookie, set by the switch link), else the browser's (Accept-Language),
// else pt-BR: the people who use vqb are operations teams in Brazil.

export const LANGS = ['pt-BR', 'en'] as const;
export type Lang = (typeof LANGS)[number];
export const LANG_COOKIE = 'vqb_lang';

const en = {
  'app.title': 'vqb console',
  'nav.batches': 'Batches',
  'nav.upload': 'Upload',
  'nav.dashboard': 'Queue dashboard',
  'nav.signOut': 'Sign out',
  'nav.switch': 'Português',
  'nav.skip': 'Skip to content',
  'signIn.title': 'Sign in',
  'signIn.token': 'Service token',
  'signIn.help': 'The same token the HTTP API takes (VQ_API_TOKENS or an account’s tokens).',
  'signIn.submit': 'Sign in',
  'signIn.invalid': 'That token is not valid.',
  'signIn.notConfigured': 'This server has no service tokens configured, so no one can sign in.',
  'signIn.expired': 'Your session ended; sign in again.',
  'signIn.crossSite':
    'That sign-in did not come from this console’s own form (another site, or a page left open too ' +
    'long); sign in here.',
  'signIn.throttled': 'Too many failed sign-ins from this address; try again in {minutes} min.',
  'list.title': 'Batches',
  'list.empty': 'No batches yet.',
  'list.refresh': 'Refresh',
  'list.live': 'Updated live.',
  'col.batch': 'Batch',
  'col.account': 'Account',
  'col.progress': 'Progress',
  'col.counts': 'Done / failed / in flight / queued',
  'col.eta': 'Time left',
  'col.waiting': 'Why it waits',
  'col.state': 'State',
  'state.finished': 'finished',
  'state.cancelled': 'cancelled',
  'state.running': 'running',
  'state.ingesting': 'reading',
  'state.archived': 'archived',
  'lines.title': 'Accounts',
  'line.running': 'running',
  'line.paused': 'paused',
  'line.pause': 'Pause account {account}',
  'line.resume': 'Resume account {account}',
  'rate.configured': '{rate}, configured',
  'rate.announced': '{rate}, announced by the upstream',
  'rate.start': '{rate}, learning the limit',
  'rate.learned': '{rate}, learned from 429s',
  'wait.paused': 'paused',
  'wait.upstream_unreachable': 'upstream unreachable',
  'wait.budget': 'spending cap reached',
  'wait.quota': 'upstream quota used up',
  'wait.rate_limit': 'rate limited',
  'wait.redis_down': 'Redis unreachable',
  'wait.redis_full': 'Redis full',
  'batch.title': 'Batch {id}',
  'batch.counts': 'Counts',
  'batch.downloads': 'Downloads',
  'batch.rejects': 'rejected rows (CSV)',
  'batch.noFailed': 'No failed plates.',
  'batch.back': 'All batches',
  'batch.archived':
    'Archived on {at}: deleted from Redis, kept in the archive folder; the counts are those at ' +
    'archiving and the downloads are rebuilt from the archive.',
  'webhooks.title': 'Webhooks',
  'webhooks.callback': 'Sent to',
  'webhooks.none': 'No delivery yet.',
  'col.event': 'Event',
  'col.attempts': 'Attempts',
  'col.lastError': 'Last error',
  'delivery.pending': 'pending',
  'delivery.retrying': 'retrying',
  'delivery.delivered': 'delivered',
  'delivery.failed': 'failed (gave up)',
  'count.total': 'rows',
  'count.enqueued': 'plates',
  'count.done': 'done',
  'count.failed': 'failed',
  'count.cancelled': 'cancelled (never sent)',
  'count.inflight': 'in flight',
  'count.queued': 'queued',
  'count.rejected': 'rejected',
  'count.duplicates': 'duplicates',
  'count.reused': 'reused',
  'count.creates': 'creates (charged)',
  'count.cost': 'spend (creates sent × the price per query)',
  'count.polls': 'polls',
  'flash.paused': 'Account {account} paused.',
  'flash.resumed': 'Account {account} resumed.',
  'upload.title': 'Upload a file',
  'upload.file': 'CSV or XLSX file',
  'upload.drop': 'Drop a file here, or choose one below.',
  'upload.help':
    'A column of plates (detected by its header, or the first column); other columns are carried to the results.',
  'upload.account': 'Account',
  'upload.pool': 'Pool of keys',
  'upload.noPool': 'none: the account only',
  'upload.callback': 'Callback URL (optional)',
  'upload.callbackHelp':
    'Gets a signed webhook (Standard Webhooks) when the batch finishes, or when its account pauses.',
  'callback.CALLBACK_URL_INVALID':
    'The callback URL is not valid: it must be an http:// or https:// address, without a user name or password.',
  'callback.CALLBACK_HOST_NOT_ALLOWED':
    'The callback URL’s host is not on this server’s allow-list (VQ_WEBHOOK_ALLOW).',
  'callback.CALLBACK_ADDRESS_FORBIDDEN':
    'The callback URL points inside a private network (loopback, private, link-local or metadata ' +
    'address): webhooks go to public addresses only.',
  'callback.CALLBACK_HOST_UNRESOLVED': 'The callback URL’s host name does not resolve: check the name.',
  'callback.WEBHOOK_SECRET_MISSING':
    'This server has no webhook secret (VQ_WEBHOOK_SECRET), so it sends no webhooks: leave the ' +
    'callback URL empty, or ask its operator.',
  'upload.deadline': 'Deadline (optional)',
  'upload.deadlineHelp':
    'When the batch should be finished: a time of day (18:00, today or else tomorrow), a span from ' +
    'now (2h, 90m) or an ISO instant. The estimate says whether it can be met.',
  'estimate.deadline': 'deadline',
  'batch.stranded':
    '{plates} plates paid with account {account}’s key wait for it (only that key can read them; nothing is ' +
    'paid again): {code}. Fix the key, then resume account {account}.',
  'batch.atRisk': 'at risk',
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
  'upload.submit': 'See the estimate',
  'estimate.title': 'Estimate for {name}',
  'estimate.intro': 'Nothing has been sent yet. This is what the batch would cost:',
  'estimate.rows': 'rows read',
  'estimate.plates': 'distinct valid plates',
  'estimate.rejected': 'rejected rows',
  'estimate.duplicates': 'duplicates',
  'estimate.alreadyFinished': 'already finished in this batch',
  'estimate.reusable': 'answered by stored results (free)',
  'estimate.creates': 'creates (each one is charged)',
  'estimate.expectedPolls': 'expected polls',
  'estimate.time': 'time at the account’s rate',
  'estimate.days': 'days under the daily cap',
  'estimate.cost': 'cost at the price per query',
  'estimate.confirm': 'Confirm and start the batch',
  'estimate.cancel': 'Cancel',
  'estimate.gone': 'This upload has expired or was already confirmed; upload the file again.',
  'error.title': 'Something went wrong',
  'error.notFound': 'Not found.',
  'error.csrf': 'The form was out of date; reload the page and try again.',
  'error.back': 'Back to the batches',
  'batch.retry.one': 'Retry the failed plate',
  'batch.retry.other': 'Retry the {n} failed plates',
  'failed.title': 'Failed plates',
  'col.code': 'Error',
  'col.plates': 'Plates',
  'col.retry': 'Running them again',
  'failed.more': 'and {n} more',
  'failed.way.poll': 'their queries never said how they ended: polling them again needs no new query',
  'failed.way.ask': 'the upstream answered this: polling again reads the same answer; only a new query asks again',
  'retry.poll.one': 'Poll the plate again ({price})',
  'retry.poll.other': 'Poll the {n} plates again ({price})',
  'retry.free': 'free: no new query',
  'retry.pollBilled': 'no new query; polls are billed',
  'retry.ask.one': 'Ask the upstream again for the plate (costs 1 query{cost})',
  'retry.ask.other': 'Ask the upstream again for the {n} plates (costs {n} queries{cost})',
  'failed.cancelled.one': '1 plate cancelled: never sent to the upstream, not charged, not run again.',
  'failed.cancelled.other': '{n} plates cancelled: never sent to the upstream, not charged, not run again.',
  'confirm.title': 'Confirm a paid retry',
  'confirm.ask.one': 'This asks the upstream again for 1 plate: 1 new query, {cost}.',
  'confirm.ask.other': 'This asks the upstream again for {n} plates: {n} new queries, {cost}.',
  'confirm.go': 'Pay {cost} and ask again',
  'confirm.back': 'Back to the batch, nothing sent',
  'flash.retried.one': '{n} failed plate queued again ({recreated} created anew, {skipped} still running).',
  'flash.retried.other': '{n} failed plates queued again ({recreated} created anew, {skipped} still running).',
  'pause.console': 'by an operator, in the console',
  'pause.operator': 'by an operator (vqb pause)',
  'pause.operatorSaid': 'by an operator: “{reason}”',
  'pause.INVALID_API_KEY':
    'the API key is not valid: put a valid key in the account’s key file, then resume the account',
  'pause.EXPIRED_API_KEY': 'the API key expired: put the new key in the account’s key file, then resume the account',
  'pause.INSUFFICIENT_PERMISSIONS':
    'the API key lacks a permission this look-up needs: ask the provider for it, then resume the account',
  'pause.other': 'a key failure ({code}): fix the key, then resume the account',
  'waitd.upstream_unreachable': 'since {since} ({ago}): {reason}; retrying (attempt {attempts})',
  'waitd.budget': 'creates wait until {until}; polls go on (raise the cap with vqb budget)',
  'waitd.budgetBatch': "creates wait at the batch's own cap; polls go on (raise it with vqb budget)",
  'waitd.quota': 'until {until}',
  'waitd.rate_limit': 'until {until}',
  'waitd.redis_down': 'the connection is lost; paid results are kept in memory until they are stored',
  'waitd.redis_full': 'Redis refuses writes (maxmemory); work resumes by itself once there is room',
  'reach.connection refused': 'connection refused',
  'reach.connection timed out': 'connection timed out',
  'reach.connection reset': 'connection reset',
  'reach.no answer in time': 'no answer in time',
  'reach.the answer stalled': 'the answer stalled',
  'reach.network error': 'network error',
  'estimate.alreadyDone': 'Every plate of this file is already finished in batch {id}: nothing would be sent.',
  'estimate.openBatch': 'Open the batch',
  'estimate.nothing':
    'This file has no valid plate to send ({rejected} rejected rows, {duplicates} duplicates): nothing to confirm.',
  'error.notFoundBatch': 'No batch “{id}” here (it does not exist, or this token may not see it).',
  'error.generic': 'The request could not be completed (code {code}).',
  'error.details': 'Technical details',
  'err.VALIDATION_FAILED': 'A field of the form is not valid.',
  'err.ACCOUNT_NOT_FOUND': 'This token may not use that account.',
  'err.POOL_NOT_FOUND': 'This token may not use that pool of keys.',
  'err.PAYLOAD_TOO_LARGE': 'The file is larger than this server takes (VQ_HTTP_BODY_LIMIT).',
  'err.TOO_MANY_PLATES': 'The file has more plates than this server takes at once (VQ_HTTP_MAX_PLATES).',
  'err.CSV_EMPTY': 'The file has no rows.',
  'err.CSV_BINARY': 'The file is not a text CSV (nor an .xlsx workbook).',
  'err.CSV_UNREADABLE': 'The file could not be read as CSV.',
  'err.CSV_UNSUPPORTED_ENCODING': 'The file is in a text encoding vqb does not read; save it as UTF-8 or Windows-1252.',
  'err.CSV_MIXED_ENCODING': 'The file mixes text encodings; save it again as UTF-8.',
  'err.CSV_NO_PLATE_COLUMN': 'No column of the file holds plates.',
  'err.XLSX_EMPTY': 'The workbook’s sheet has no rows.',
  'err.XLSX_UNREADABLE': 'The workbook could not be read.',
  'err.XLSX_NO_PLATE_COLUMN': 'No column of the sheet holds plates.',
  'err.XLSX_TOO_LARGE':
    'The workbook is larger than this server reads, once unpacked: save the sheet as CSV and upload that.',
  'err.BATCH_ID_TAKEN': 'A batch with this id holds another file.',
  'err.UNAUTHORIZED': 'Sign in first.',
  'err.TOO_MANY_UPLOADS':
    'There are too many unconfirmed uploads (this session’s, or the server’s in all): confirm one, ' +
    'or wait for them to expire (an hour after each upload).',
  'err.TOO_MANY_STREAMS': 'Too many pages of this session follow live updates; close one.',
  'err.CROSS_SITE': 'This request did not come from the console’s own page.',
  'err.SIGN_IN_THROTTLED': 'Too many failed sign-ins from this address; wait a few minutes.',
  'nav.watches': 'Watch lists',
  'watch.title': 'Watch lists',
  'watch.intro': 'Plates re-checked on a schedule; each round reports only what changed.',
  'watch.empty': 'No watch lists yet. Add one with `vqb watch add FILE --every 7d` or POST /v1/watches.',
  'watch.col.name': 'Watch list',
  'watch.col.plates': 'Plates',
  'watch.col.schedule': 'Schedule',
  'watch.col.last': 'Last round',
  'watch.col.budget': 'Month budget',
  'watch.every': 'every {every}',
  'watch.cron': 'cron {cron} (UTC)',
  'watch.window': 'only {window} UTC',
  'watch.next': 'next {at}',
  'watch.none': 'no round yet',
  'watch.running': 'round {round} running',
  'watch.first': 'round {round}: recorded (first round)',
  'watch.changed': 'round {round}: {plates} plates changed ({changes} fields)',
  'watch.download': 'Changes of round {round} (CSV)',
  'watch.budget': '{spent} of {budget} creates',
  'watch.noBudget': 'none',
  'watch.pause': 'Pause {name}',
  'watch.resume': 'Resume {name}',
  'watch.state.idle': 'waiting for its next round',
  'watch.state.running': 'round running',
  'watch.state.overlap': 'the last round was still running when the next came due',
  'watch.state.held': 'held at its month budget',
  'watch.state.window': 'due; waits for its time window',
  'watch.state.paused': 'paused',
  none: '—',
} as const;

export type Key = keyof typeof en;

const ptBR: Record<Key, string> = {
  'app.title': 'Console vqb',
  'nav.batches': 'Lotes',
  'nav.upload': 'Enviar arquivo',
  'nav.dashboard': 'Painel das filas',
  'nav.signOut': 'Sair',
  'nav.switch': 'English',
  'nav.skip': 'Pular para o conteúdo',
  'signIn.title': 'Entrar',
  'signIn.token': 'Token de serviço',
  'signIn.help': 'O mesmo token que a API HTTP aceita (VQ_API_TOKENS ou os tokens de uma conta).',
  'signIn.submit': 'Entrar',
  'signIn.invalid': 'Esse token não é válido.',
  'signIn.notConfigured': 'Este servidor não tem tokens de serviço configurados; ninguém pode entrar.',
  'signIn.expired': 'Sua sessão terminou; entre de novo.',
  'signIn.crossSite':
    'Esse pedido de entrada não veio do formulário deste console (outro site, ou uma página aberta ' +
    'há tempo demais); entre por aqui.',
  'signIn.throttled': 'Tentativas de entrada com falha demais a partir deste endereço; tente de novo em {minutes} min.',
  'list.title': 'Lotes',
  'list.empty': 'Nenhum lote ainda.',
  'list.refresh': 'Atualizar',
  'list.live': 'Atualizado ao vivo.',
  'col.batch': 'Lote',
  'col.account': 'Conta',
  'col.progress': 'Progresso',
  'col.counts': 'Concluídas / com falha / em andamento / na fila',
  'col.eta': 'Tempo restante',
  'col.waiting': 'Por que espera',
  'col.state': 'Estado',
  'state.finished': 'concluído',
  'state.cancelled': 'cancelado',
  'state.running': 'em andamento',
  'state.ingesting': 'lendo',
  'state.archived': 'arquivado',
  'lines.title': 'Contas',
  'line.running': 'em andamento',
  'line.paused': 'pausada',
  'line.pause': 'Pausar a conta {account}',
  'rate.configured': '{rate}, configurado',
  'rate.announced': '{rate}, anunciado pela API',
  'rate.start': '{rate}, aprendendo o limite',
  'rate.learned': '{rate}, aprendido com as respostas 429',
  'line.resume': 'Retomar a conta {account}',
  'wait.paused': 'pausada',
  'wait.upstream_unreachable': 'fornecedor fora do ar',
  'wait.budget': 'limite de gastos atingido',
  'wait.quota': 'cota do fornecedor esgotada',
  'wait.rate_limit': 'limite de requisições',
  'wait.redis_down': 'Redis fora do ar',
  'wait.redis_full': 'Redis cheio',
  'batch.title': 'Lote {id}',
  'batch.counts': 'Contagens',
  'batch.downloads': 'Arquivos para baixar',
  'batch.rejects': 'linhas rejeitadas (CSV)',
  'batch.noFailed': 'Nenhuma placa com falha.',
  'batch.back': 'Todos os lotes',
  'batch.archived':
    'Arquivado em {at}: apagado do Redis, guardado na pasta de arquivo; as contagens são as do ' +
    'arquivamento e os downloads são refeitos a partir do arquivo.',
  'webhooks.title': 'Webhooks',
  'webhooks.callback': 'Enviados para',
  'webhooks.none': 'Nenhuma entrega ainda.',
  'col.event': 'Evento',
  'col.attempts': 'Tentativas',
  'col.lastError': 'Último erro',
  'delivery.pending': 'pendente',
  'delivery.retrying': 'tentando de novo',
  'delivery.delivered': 'entregue',
  'delivery.failed': 'falhou (desistiu)',
  'count.total': 'linhas',
  'count.enqueued': 'placas',
  'count.done': 'concluídas',
  'count.failed': 'com falha',
  'count.cancelled': 'canceladas (nunca enviadas)',
  'count.inflight': 'em andamento',
  'count.queued': 'na fila',
  'count.rejected': 'rejeitadas',
  'count.duplicates': 'duplicadas',
  'count.reused': 'reaproveitadas',
  'count.creates': 'consultas criadas (cobradas)',
  'count.cost': 'gasto (consultas enviadas × preço por consulta)',
  'count.polls': 'verificações',
  'flash.paused': 'Conta {account} pausada.',
  'flash.resumed': 'Conta {account} retomada.',
  'upload.title': 'Enviar um arquivo',
  'upload.file': 'Arquivo CSV ou XLSX',
  'upload.drop': 'Solte um arquivo aqui, ou escolha um abaixo.',
  'upload.help':
    'Uma coluna de placas (achada pelo cabeçalho, ou a primeira coluna); as outras colunas seguem para os resultados.',
  'upload.account': 'Conta',
  'upload.pool': 'Grupo de chaves',
  'upload.noPool': 'nenhum: só a conta',
  'upload.callback': 'URL de retorno (opcional)',
  'upload.callbackHelp':
    'Recebe um webhook assinado (Standard Webhooks) quando o lote termina, ou quando a conta dele é pausada.',
  'callback.CALLBACK_URL_INVALID':
    'A URL de retorno não é válida: deve ser um endereço http:// ou https://, sem usuário nem senha.',
  'callback.CALLBACK_HOST_NOT_ALLOWED':
    'O host da URL de retorno não está na lista de permitidos deste servidor (VQ_WEBHOOK_ALLOW).',
  'callback.CALLBACK_ADDRESS_FORBIDDEN':
    'A URL de retorno aponta para dentro de uma rede privada (endereço de loopback, privado, ' +
    'link-local ou de metadados): webhooks vão só para endereços públicos.',
  'callback.CALLBACK_HOST_UNRESOLVED': 'O nome do host da URL de retorno não resolve: confira o nome.',
  'callback.WEBHOOK_SECRET_MISSING':
    'Este servidor não tem segredo de webhook (VQ_WEBHOOK_SECRET), então não envia webhooks: deixe ' +
    'a URL de retorno vazia, ou fale com quem o opera.',
  'upload.deadline': 'Prazo (opcional)',
  'upload.deadlineHelp':
    'Quando o lote deve estar pronto: uma hora do dia (18:00, hoje ou senão amanhã), um intervalo a ' +
    'partir de agora (2h, 90m) ou um instante ISO. A estimativa diz se ele pode ser cumprido.',
  'estimate.deadline': 'prazo',
  'batch.stranded':
    '{plates} placas pagas com a chave da conta {account} esperam por ela (só essa chave pode lê-las; nada é ' +
    'pago de novo): {code}. Corrija a chave e retome a conta {account}.',
  'batch.atRisk': 'em risco',
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
  'upload.submit': 'Ver a estimativa',
  'estimate.title': 'Estimativa para {name}',
  'estimate.intro': 'Nada foi enviado ainda. Isto é o que o lote custaria:',
  'estimate.rows': 'linhas lidas',
  'estimate.plates': 'placas válidas distintas',
  'estimate.rejected': 'linhas rejeitadas',
  'estimate.duplicates': 'duplicadas',
  'estimate.alreadyFinished': 'já concluídas neste lote',
  'estimate.reusable': 'respondidas por resultados guardados (grátis)',
  'estimate.creates': 'consultas criadas (cada uma é cobrada)',
  'estimate.expectedPolls': 'verificações esperadas',
  'estimate.time': 'tempo no ritmo da conta',
  'estimate.days': 'dias sob o limite diário',
  'estimate.cost': 'custo ao preço por consulta',
  'estimate.confirm': 'Confirmar e iniciar o lote',
  'estimate.cancel': 'Cancelar',
  'estimate.gone': 'Este envio expirou ou já foi confirmado; envie o arquivo de novo.',
  'error.title': 'Algo deu errado',
  'error.notFound': 'Não encontrado.',
  'error.csrf': 'O formulário estava desatualizado; recarregue a página e tente de novo.',
  'error.back': 'Voltar aos lotes',
  'batch.retry.one': 'Tentar de novo a placa com falha',
  'batch.retry.other': 'Tentar de novo as {n} placas com falha',
  'failed.title': 'Placas com falha',
  'col.code': 'Erro',
  'col.plates': 'Placas',
  'col.retry': 'Como tentar de novo',
  'failed.more': 'e mais {n}',
  'failed.way.poll': 'as consultas nunca disseram como terminaram: acompanhá-las de novo não pede consulta nova',
  'failed.way.ask':
    'o fornecedor já respondeu isto: acompanhar de novo lê a mesma resposta; só uma consulta nova pergunta de novo',
  'retry.poll.one': 'Acompanhar de novo a placa ({price})',
  'retry.poll.other': 'Acompanhar de novo as {n} placas ({price})',
  'retry.free': 'grátis: sem consulta nova',
  'retry.pollBilled': 'sem consulta nova; as leituras são cobradas',
  'retry.ask.one': 'Perguntar de novo ao fornecedor pela placa (custa 1 consulta{cost})',
  'retry.ask.other': 'Perguntar de novo ao fornecedor pelas {n} placas (custa {n} consultas{cost})',
  'failed.cancelled.one': '1 placa cancelada: nunca enviada ao fornecedor, sem custo, não roda de novo.',
  'failed.cancelled.other': '{n} placas canceladas: nunca enviadas ao fornecedor, sem custo, não rodam de novo.',
  'confirm.title': 'Confirmar uma nova consulta paga',
  'confirm.ask.one': 'Isto pergunta de novo ao fornecedor por 1 placa: 1 consulta nova, {cost}.',
  'confirm.ask.other': 'Isto pergunta de novo ao fornecedor por {n} placas: {n} consultas novas, {cost}.',
  'confirm.go': 'Pagar {cost} e perguntar de novo',
  'confirm.back': 'Voltar ao lote, nada enviado',
  'flash.retried.one': '{n} placa com falha voltou à fila ({recreated} criada de novo, {skipped} ainda em andamento).',
  'flash.retried.other':
    '{n} placas com falha voltaram à fila ({recreated} criadas de novo, {skipped} ainda em andamento).',
  'pause.console': 'por um operador, no console',
  'pause.operator': 'por um operador (vqb pause)',
  'pause.operatorSaid': 'por um operador: “{reason}”',
  'pause.INVALID_API_KEY':
    'a chave da API não é válida: coloque uma chave válida no arquivo da chave da conta e retome a conta',
  'pause.EXPIRED_API_KEY': 'a chave da API expirou: coloque a nova chave no arquivo da chave da conta e retome a conta',
  'pause.INSUFFICIENT_PERMISSIONS':
    'falta à chave da API uma permissão que esta consulta exige: peça-a ao fornecedor e retome a conta',
  'pause.other': 'uma falha da chave ({code}): corrija a chave e retome a conta',
  'waitd.upstream_unreachable': 'desde {since} ({ago}): {reason}; tentando de novo (tentativa {attempts})',
  'waitd.budget': 'as criações esperam até {until}; as consultas seguem (aumente o limite com vqb budget)',
  'waitd.budgetBatch': 'as criações esperam no limite do próprio lote; as consultas seguem (aumente-o com vqb budget)',
  'waitd.quota': 'até {until}',
  'waitd.rate_limit': 'até {until}',
  'waitd.redis_down': 'a conexão caiu; os resultados pagos ficam na memória até serem gravados',
  'waitd.redis_full': 'o Redis recusa gravações (maxmemory); o trabalho volta sozinho quando houver espaço',
  'reach.connection refused': 'conexão recusada',
  'reach.connection timed out': 'tempo de conexão esgotado',
  'reach.connection reset': 'conexão interrompida',
  'reach.no answer in time': 'sem resposta a tempo',
  'reach.the answer stalled': 'a resposta parou no meio',
  'reach.network error': 'erro de rede',
  'estimate.alreadyDone': 'Todas as placas deste arquivo já foram concluídas no lote {id}: nada seria enviado.',
  'estimate.openBatch': 'Abrir o lote',
  'estimate.nothing':
    'Este arquivo não tem placa válida para enviar ({rejected} linhas rejeitadas, {duplicates} ' +
    'repetidas): nada a confirmar.',
  'error.notFoundBatch': 'Nenhum lote “{id}” aqui (não existe, ou este token não pode vê-lo).',
  'error.generic': 'Não foi possível atender o pedido (código {code}).',
  'error.details': 'Detalhes técnicos',
  'err.VALIDATION_FAILED': 'Um campo do formulário não é válido.',
  'err.ACCOUNT_NOT_FOUND': 'Este token não pode usar essa conta.',
  'err.POOL_NOT_FOUND': 'Este token não pode usar esse grupo de chaves.',
  'err.PAYLOAD_TOO_LARGE': 'O arquivo é maior do que este servidor aceita (VQ_HTTP_BODY_LIMIT).',
  'err.TOO_MANY_PLATES': 'O arquivo tem mais placas do que este servidor aceita de uma vez (VQ_HTTP_MAX_PLATES).',
  'err.CSV_EMPTY': 'O arquivo não tem linhas.',
  'err.CSV_BINARY': 'O arquivo não é um CSV de texto (nem uma planilha .xlsx).',
  'err.CSV_UNREADABLE': 'Não foi possível ler o arquivo como CSV.',
  'err.CSV_UNSUPPORTED_ENCODING':
    'O arquivo está numa codificação de texto que o vqb não lê; salve-o como UTF-8 ou Windows-1252.',
  'err.CSV_MIXED_ENCODING': 'O arquivo mistura codificações de texto; salve-o de novo como UTF-8.',
  'err.CSV_NO_PLATE_COLUMN': 'Nenhuma coluna do arquivo tem placas.',
  'err.XLSX_EMPTY': 'A aba da planilha não tem linhas.',
  'err.XLSX_UNREADABLE': 'Não foi possível ler a planilha.',
  'err.XLSX_NO_PLATE_COLUMN': 'Nenhuma coluna da aba tem placas.',
  'err.XLSX_TOO_LARGE':
    'A planilha, descompactada, é maior do que este servidor lê: salve a aba como CSV e envie esse arquivo.',
  'err.BATCH_ID_TAKEN': 'Um lote com este id contém outro arquivo.',
  'err.UNAUTHORIZED': 'Entre primeiro.',
  'err.TOO_MANY_UPLOADS':
    'Há envios demais sem confirmação (desta sessão, ou do servidor no total): confirme um, ou ' +
    'espere que expirem (uma hora após cada envio).',
  'err.TOO_MANY_STREAMS': 'Páginas demais desta sessão acompanham as atualizações ao vivo; feche uma.',
  'err.CROSS_SITE': 'Este pedido não veio da própria página do console.',
  'err.SIGN_IN_THROTTLED': 'Tentativas de entrada com falha demais a partir deste endereço; espere alguns minutos.',
  'nav.watches': 'Listas de monitoramento',
  'watch.title': 'Listas de monitoramento',
  'watch.intro': 'Placas consultadas de novo periodicamente; cada rodada mostra só o que mudou.',
  'watch.empty':
    'Nenhuma lista de monitoramento ainda. Crie uma com `vqb watch add ARQUIVO --every 7d` ou POST /v1/watches.',
  'watch.col.name': 'Lista',
  'watch.col.plates': 'Placas',
  'watch.col.schedule': 'Agenda',
  'watch.col.last': 'Última rodada',
  'watch.col.budget': 'Orçamento do mês',
  'watch.every': 'a cada {every}',
  'watch.cron': 'cron {cron} (UTC)',
  'watch.window': 'só {window} UTC',
  'watch.next': 'próxima {at}',
  'watch.none': 'nenhuma rodada ainda',
  'watch.running': 'rodada {round} em andamento',
  'watch.first': 'rodada {round}: registrada (primeira rodada)',
  'watch.changed': 'rodada {round}: {plates} placas mudaram ({changes} campos)',
  'watch.download': 'Mudanças da rodada {round} (CSV)',
  'watch.budget': '{spent} de {budget} consultas',
  'watch.noBudget': 'nenhum',
  'watch.pause': 'Pausar {name}',
  'watch.resume': 'Retomar {name}',
  'watch.state.idle': 'aguardando a próxima rodada',
  'watch.state.running': 'rodada em andamento',
  'watch.state.overlap': 'a rodada anterior ainda estava em andamento quando a próxima venceu',
  'watch.state.held': 'parada no orçamento do mês',
  'watch.state.window': 'vencida; aguarda a janela de horário',
  'watch.state.paused': 'pausada',
  none: '—',
};

const DICTIONARIES: Record<Lang, Record<Key, string>> = { en, 'pt-BR': ptBR };

export type Translate = (key: Key, vars?: Record<string, string | number>) => string;

/** A key the dictionaries have (both do: the pt-BR one is typed by the English one's keys). */
export function isKey(key: string): key is Key {
  return Object.hasOwn(en, key);
}

export function translator(lang: Lang): Translate {
  const dictionary = DICTIONARIES[lang];
  return (key, vars) =>
    dictionary[key].replace(/\{(\w+)\}/g, (whole, name: string) => (vars && name in vars ? String(vars[name]) : whole));
}

/** The cookie's choice, else the first Accept-Language range we speak (q-values honoured), else pt-BR. */
export function pickLang(cookie: string | undefined, acceptLanguage: string | undefined): Lang {
  if (cookie === 'en' || cookie === 'pt-BR') return cookie;
  const ranges = (acceptLanguage ?? '')
    .split(',')
    .map((part, i) => {
      const [tag = '', ...params] = part.trim().split(';');
      const q = Number(
        params
          .find((p) => p.trim().startsWith('q='))
          ?.trim()
          .slice(2) ?? '1',
      );
      return { tag: tag.toLowerCase(), q: Number.isFinite(q) ? q : 0, i };
    })
    .filter((r) => r.tag !== '' && r.q > 0)
    .sort((a, b) => b.q - a.q || a.i - b.i);
  for (const r of ranges) {
    if (r.tag === 'pt' || r.tag.startsWith('pt-')) return 'pt-BR';
    if (r.tag === 'en' || r.tag.startsWith('en-')) return 'en';
  }
  return 'pt-BR';
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

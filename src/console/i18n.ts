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
  'batch.retry': 'Retry the {n} failed plates',
  'batch.noFailed': 'No failed plates.',
  'batch.back': 'All batches',
  'batch.archived': 'Archived on {at}: deleted from Redis, kept in the archive folder; the counts are those at archiving and the downloads are rebuilt from the archive.',
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
  'count.inflight': 'in flight',
  'count.queued': 'queued',
  'count.rejected': 'rejected',
  'count.duplicates': 'duplicates',
  'count.reused': 'reused',
  'count.creates': 'creates (charged)',
  'count.polls': 'polls',
  'flash.retried': '{n} failed plates queued again ({recreated} created anew, {skipped} still running).',
  'flash.paused': 'Account {account} paused.',
  'flash.resumed': 'Account {account} resumed.',
  'upload.title': 'Upload a file',
  'upload.file': 'CSV or XLSX file',
  'upload.drop': 'Drop a file here, or choose one below.',
  'upload.help': 'A column of plates (detected by its header, or the first column); other columns are carried to the results.',
  'upload.account': 'Account',
  'upload.callback': 'Callback URL (optional)',
  'upload.callbackHelp': 'Gets a signed webhook (Standard Webhooks) when the batch finishes, or when its account pauses.',
  'callback.CALLBACK_URL_INVALID': 'The callback URL is not valid: it must be an http:// or https:// address, without a user name or password.',
  'callback.CALLBACK_HOST_NOT_ALLOWED': 'The callback URL’s host is not on this server’s allow-list (VQ_WEBHOOK_ALLOW).',
  'callback.WEBHOOK_SECRET_MISSING': 'This server has no webhook secret (VQ_WEBHOOK_SECRET), so it sends no webhooks: leave the callback URL empty, or ask its operator.',
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
  'estimate.confirm': 'Confirm and start the batch',
  'estimate.cancel': 'Cancel',
  'estimate.gone': 'This upload has expired or was already confirmed; upload the file again.',
  'error.title': 'Something went wrong',
  'error.notFound': 'Not found.',
  'error.csrf': 'The form was out of date; reload the page and try again.',
  'error.back': 'Back to the batches',
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
  'batch.downloads': 'Downloads',
  'batch.rejects': 'linhas rejeitadas (CSV)',
  'batch.retry': 'Tentar de novo as {n} placas com falha',
  'batch.noFailed': 'Nenhuma placa com falha.',
  'batch.back': 'Todos os lotes',
  'batch.archived': 'Arquivado em {at}: apagado do Redis, guardado na pasta de arquivo; as contagens são as do arquivamento e os downloads são refeitos a partir do arquivo.',
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
  'count.inflight': 'em andamento',
  'count.queued': 'na fila',
  'count.rejected': 'rejeitadas',
  'count.duplicates': 'duplicadas',
  'count.reused': 'reaproveitadas',
  'count.creates': 'consultas criadas (cobradas)',
  'count.polls': 'verificações',
  'flash.retried': '{n} placas com falha voltaram à fila ({recreated} criadas de novo, {skipped} ainda em andamento).',
  'flash.paused': 'Conta {account} pausada.',
  'flash.resumed': 'Conta {account} retomada.',
  'upload.title': 'Enviar um arquivo',
  'upload.file': 'Arquivo CSV ou XLSX',
  'upload.drop': 'Solte um arquivo aqui, ou escolha um abaixo.',
  'upload.help': 'Uma coluna de placas (achada pelo cabeçalho, ou a primeira coluna); as outras colunas seguem para os resultados.',
  'upload.account': 'Conta',
  'upload.callback': 'URL de retorno (opcional)',
  'upload.callbackHelp': 'Recebe um webhook assinado (Standard Webhooks) quando o lote termina, ou quando a conta dele é pausada.',
  'callback.CALLBACK_URL_INVALID': 'A URL de retorno não é válida: deve ser um endereço http:// ou https://, sem usuário nem senha.',
  'callback.CALLBACK_HOST_NOT_ALLOWED': 'O host da URL de retorno não está na lista de permitidos deste servidor (VQ_WEBHOOK_ALLOW).',
  'callback.WEBHOOK_SECRET_MISSING':
    'Este servidor não tem segredo de webhook (VQ_WEBHOOK_SECRET), então não envia webhooks: deixe a URL de retorno vazia, ou fale com quem o opera.',
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
  'estimate.confirm': 'Confirmar e iniciar o lote',
  'estimate.cancel': 'Cancelar',
  'estimate.gone': 'Este envio expirou ou já foi confirmado; envie o arquivo de novo.',
  'error.title': 'Algo deu errado',
  'error.notFound': 'Não encontrado.',
  'error.csrf': 'O formulário estava desatualizado; recarregue a página e tente de novo.',
  'error.back': 'Voltar aos lotes',
  none: '—',
};

const DICTIONARIES: Record<Lang, Record<Key, string>> = { en, 'pt-BR': ptBR };

export type Translate = (key: Key, vars?: Record<string, string | number>) => string;

export function translator(lang: Lang): Translate {
  const dictionary = DICTIONARIES[lang];
  return (key, vars) => dictionary[key].replace(/\{(\w+)\}/g, (whole, name: string) => (vars && name in vars ? String(vars[name]) : whole));
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
const NUMBER_FORMATS: Record<Lang, Intl.NumberFormat> = { en: new Intl.NumberFormat('en'), 'pt-BR': new Intl.NumberFormat('pt-BR') };

export function formatNumber(lang: Lang, n: number): string {
  return NUMBER_FORMATS[lang].format(n);
}

export function formatSeconds(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${String(s % 60).padStart(2, '0')} s`;
  const h = Math.floor(s / 3600);
  return h < 48 ? `${h} h ${String(Math.floor((s % 3600) / 60)).padStart(2, '0')} min` : `${Math.floor(h / 24)} d ${h % 24} h`;
}

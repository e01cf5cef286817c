// Sentences the console builds from data, in the page's language: plural forms and errors. Why a
// line waits, deadlines and instants are the shared presenter's (presenters/waits.ts). The
// dictionary is i18n.ts; this turns state into its words.

import type { ErrorBody } from '../http/errors.js';
import { isKey, type Key, type Lang, type Translate } from './i18n.js';

interface Ctx {
  lang: Lang;
  t: Translate;
}

const PLURALS: Record<Lang, Intl.PluralRules> = {
  en: new Intl.PluralRules('en'),
  'pt-BR': new Intl.PluralRules('pt-BR'),
};
/** `key.one` or `key.other`, as the language's plural rules choose for `n`. */
export function plural(ctx: Ctx, key: string, n: number, vars: Record<string, string | number> = {}): string {
  const form = PLURALS[ctx.lang].select(n) === 'one' ? 'one' : 'other';
  return ctx.t(`${key}.${form}` as Key, { n, ...vars });
}

/** An error for a person: the page's words for its code, the server's own text kept as a detail. */
export function errorText(ctx: Ctx, body: ErrorBody, batchId?: string): { message: string; detail?: string } {
  const { t } = ctx;
  const code = body.error.code;
  if (body.statusCode === 404 && batchId !== undefined) return { message: t('error.notFoundBatch', { id: batchId }) };
  if (body.statusCode === 404) return { message: t('error.notFound'), detail: body.error.message };
  if (code === 'CSRF') return { message: t('error.csrf') };
  const known = `err.${code}`;
  const message = isKey(known) ? t(known) : t('error.generic', { code });
  return { message, detail: body.error.message };
}

// Counts turned into money. A price is kept in millionths of the currency unit (an integer), so
// 1,000 creates at 0.35 are 350.00 exactly and not 350.00000000000006; amounts are rounded to the
// currency's minor unit (2 for BRL) only when they are shown or handed out. Pure: no I/O.
import { ConfigError, VqbError } from './errors.js';

export interface Price {
  /** Per query created (the upstream bills creates), in millionths. */
  perQueryMicros: number;
  /** Per poll (0 unless the upstream bills reads too), in millionths. */
  perPollMicros: number;
  /** ISO 4217, upper case (BRL unless VQ_CURRENCY says otherwise). */
  currency: string;
}

/** An amount as the API and `--json` give it: a number in the currency's unit, and the currency. */
export interface Money {
  amount: number;
  currency: string;
}

const MICROS = 1_000_000;

/** `0.35`, `0,35`, `1.234,50`, `1,234.50` or `150` → millionths; undefined when it is not an amount. */
export function parseAmountMicros(text: string): number | undefined {
  const t = text.trim().replace(/^R\$\s*/i, '');
  let normal: string;
  if (/^\d{1,3}(\.\d{3})+(,\d+)?$/.test(t)) normal = t.replaceAll('.', '').replace(',', '.');
  else if (/^\d{1,3}(,\d{3})+(\.\d+)?$/.test(t)) normal = t.replaceAll(',', '');
  else if (/^\d+([.,]\d+)?$/.test(t)) normal = t.replace(',', '.');
  else return undefined;
  const [whole = '0', fraction = ''] = normal.split('.');
  if (fraction.length > 6) return undefined;
  const micros = Number(whole) * MICROS + Number(fraction.padEnd(6, '0'));
  return Number.isSafeInteger(micros) ? micros : undefined;
}

export function isCurrency(code: string): boolean {
  if (!/^[A-Z]{3}$/.test(code)) return false;
  try {
    new Intl.NumberFormat('en', { style: 'currency', currency: code });
    return true;
  } catch {
    return false;
  }
}

/** Digits after the decimal point of the currency (2 for BRL, 0 for JPY). */
function minorDigits(currency: string): number {
  return new Intl.NumberFormat('en', { style: 'currency', currency }).resolvedOptions().maximumFractionDigits ?? 2;
}

/** Millionths → the currency's unit, rounded to its minor unit. */
export function fromMicros(micros: number, currency: string): Money {
  const digits = minorDigits(currency);
  const step = MICROS / 10 ** digits;
  return { amount: Math.round(micros / step) / 10 ** digits, currency };
}

/** What `creates` queries and `polls` polls cost at `price`. */
export function costOf(price: Price, creates: number, polls = 0): Money {
  return fromMicros(creates * price.perQueryMicros + polls * price.perPollMicros, price.currency);
}

/** `R$ 1.234,50`: pt-BR, as the people who pay read it (a plain space, not the NBSP Intl puts there). */
export function formatMoney(money: Money): string {
  return new Intl.NumberFormat('pt-BR', { style: 'currency', currency: money.currency })
    .format(money.amount)
    .replace(/[\u00a0\u202f]/g, ' ');
}

/**
 * A spending cap in money, as the creates it allows at the price in force (whole queries: a cap of
 * 1.00 at 0.35 allows 2). Polls are not in it: the price is per query created (docs/accounts.md).
 * No price (or a price of 0) cannot turn money into creates: NO_PRICE, never a guess.
 */
export function createsForSpend(maxSpendMicros: number, price: Price | undefined, account: string): number {
  if (!price || price.perQueryMicros === 0) {
    throw new VqbError(
      'NO_PRICE',
      `a cap in money needs a price per query for account ${account}: set VQ_PRICE_PER_QUERY (or ` +
        `pricePerQuery of the account in VQ_ACCOUNTS_FILE), or give the cap in creates (--max-creates, maxCreates)`,
    );
  }
  return Math.floor(maxSpendMicros / price.perQueryMicros);
}

/** The batch's creates cap from a cap in creates and/or one in money (the smaller holds); undefined = none. */
export function createsCap(
  caps: { maxCreates?: number | undefined; maxSpend?: number | undefined },
  price: Price | undefined,
  account: string,
): number | undefined {
  if (caps.maxSpend === undefined) return caps.maxCreates;
  const fromSpend = createsForSpend(Math.round(caps.maxSpend * MICROS), price, account);
  return caps.maxCreates === undefined ? fromSpend : Math.min(caps.maxCreates, fromSpend);
}

/** A price setting's value (`0.35`) → millionths, or a ConfigError naming the setting. */
export function priceMicros(name: string, text: string): number {
  const micros = parseAmountMicros(text);
  if (micros === undefined)
    throw new ConfigError(
      name,
      `expected an amount such as 0.35 or 1.50 (at most 6 decimals); got ${JSON.stringify(text)}`,
    );
  return micros;
}

/**
 * What several accounts spent, one amount per currency: `counts` of each account (creates that
 * left, polls that left) at its own price; accounts without a price add nothing.
 */
export function spendOf(
  accounts: readonly { id: string; price: Price | undefined }[],
  counts: (accountId: string) => { creates: number; polls: number } | undefined,
): Money[] {
  const micros = new Map<string, number>();
  for (const account of accounts) {
    const c = counts(account.id);
    if (!account.price || !c) continue;
    const m = c.creates * account.price.perQueryMicros + c.polls * account.price.perPollMicros;
    micros.set(account.price.currency, (micros.get(account.price.currency) ?? 0) + m);
  }
  return [...micros].map(([currency, m]) => fromMicros(m, currency));
}

/** A batch's spend as the API shows it: what left and may be billed, at the price, and the price. */
export interface BatchCost extends Money {
  perQuery: number;
  perPoll: number;
  /** The batch's creates cap in money, when it has one. */
  maxSpend?: number;
  /** What the upstream's answers said of their own price, beside the estimate (x-query-cost, x-billed). */
  reported?: { amount: number; answers: number; billed: number; notBilled: number };
}

export function batchCost(
  price: Price,
  counts: { createsSent?: number; creates: number; pollsSent?: number; polls: number },
  maxCreates?: number,
  reported?: { answers: number; micros: number; billed: number; notBilled: number },
): BatchCost {
  return {
    ...costOf(price, counts.createsSent ?? counts.creates, counts.pollsSent ?? counts.polls),
    perQuery: price.perQueryMicros / MICROS,
    perPoll: price.perPollMicros / MICROS,
    ...(maxCreates !== undefined ? { maxSpend: costOf(price, maxCreates).amount } : {}),
    ...(reported
      ? {
          reported: {
            amount: fromMicros(reported.micros, price.currency).amount,
            answers: reported.answers,
            billed: reported.billed,
            notBilled: reported.notBilled,
          },
        }
      : {}),
  };
}

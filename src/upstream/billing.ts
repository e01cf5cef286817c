// What an answer says of its own price, when it says anything: `x-query-cost: 0.35` (the amount,
// in the account's currency) and `x-billed: true|false`. The contract promises neither header;
// vqb records them beside its own estimate (queue/costs.ts), never instead of it. Pure.
import { parseAmountMicros } from '../money.js';

export interface Billing {
  /** The price the answer stated, in millionths. */
  costMicros?: number;
  /** Whether the answer said it was billed. */
  billed?: boolean;
}

const YES = new Set(['true', '1', 'yes', 'sim']);
const NO = new Set(['false', '0', 'no', 'nao', 'não']);

function header(headers: Record<string, string | string[] | undefined>, name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/** The billing headers of an answer; undefined when it carries none that can be read. */
export function billingFrom(headers: Record<string, string | string[] | undefined>): Billing | undefined {
  const cost = header(headers, 'x-query-cost');
  const billedText = header(headers, 'x-billed')?.trim().toLowerCase();
  const costMicros = cost === undefined ? undefined : parseAmountMicros(cost);
  const billed =
    billedText === undefined ? undefined : YES.has(billedText) ? true : NO.has(billedText) ? false : undefined;
  if (costMicros === undefined && billed === undefined) return undefined;
  return { ...(costMicros !== undefined ? { costMicros } : {}), ...(billed !== undefined ? { billed } : {}) };
}

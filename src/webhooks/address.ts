// Which addresses a webhook may never reach (security issue #35): a tenant's callbackUrl must not
// make this server knock on its own network — loopback, private and link-local ranges, the cloud
// metadata service (169.254.169.254, metadata.google.internal), CGNAT, multicast — however the
// address is spelt. WHATWG URL parsing already turns `2852039166`, `0x7f.1` and `0177.0.0.1` into
// dotted IPv4; what is left is IPv6 forms that carry an IPv4 address inside (mapped, compatible,
// NAT64, 6to4), which are judged by the IPv4 address they carry. Pure functions, plus the one
// resolver (injected: tests give names the answers they need, as they give the clock).
import { lookup } from 'node:dns/promises';
import { BlockList, isIPv4, isIPv6 } from 'node:net';

/** One answer of a name lookup (dns.lookup's shape). */
export interface ResolvedAddress {
  address: string;
  family: number;
}

/** Every address a host name resolves to now (dns.lookup with `all`). Injected in tests. */
export type Resolve = (hostname: string) => Promise<ResolvedAddress[]>;

export const systemResolve: Resolve = (hostname) => lookup(hostname, { all: true, verbatim: true });

/** Why an address is refused, by range; the first match names it. */
const RANGES: readonly (readonly [kind: string, cidr: string])[] = [
  ['unspecified', '0.0.0.0/8'],
  ['private', '10.0.0.0/8'],
  ['shared (CGNAT)', '100.64.0.0/10'],
  ['loopback', '127.0.0.0/8'],
  ['link-local (cloud metadata)', '169.254.0.0/16'],
  ['private', '172.16.0.0/12'],
  ['reserved', '192.0.0.0/24'],
  ['documentation', '192.0.2.0/24'],
  ['reserved', '192.88.99.0/24'],
  ['private', '192.168.0.0/16'],
  ['reserved', '198.18.0.0/15'],
  ['documentation', '198.51.100.0/24'],
  ['documentation', '203.0.113.0/24'],
  ['multicast', '224.0.0.0/4'],
  ['broadcast', '255.255.255.255/32'],
  ['reserved', '240.0.0.0/4'],
  ['unspecified', '::/128'],
  ['loopback', '::1/128'],
  ['reserved', '100::/64'],
  ['NAT64 (local use)', '64:ff9b:1::/48'],
  ['Teredo', '2001::/32'],
  ['documentation', '2001:db8::/32'],
  ['documentation', '3fff::/20'],
  ['reserved', '5f00::/16'],
  ['private', 'fc00::/7'],
  ['link-local', 'fe80::/10'],
  ['site-local', 'fec0::/10'],
  ['multicast', 'ff00::/8'],
];

const LISTS: readonly (readonly [string, BlockList])[] = RANGES.map(([kind, cidr]) => {
  const [net, bits] = cidr.split('/') as [string, string];
  const list = new BlockList();
  list.addSubnet(net, Number(bits), isIPv4(net) ? 'ipv4' : 'ipv6');
  return [kind, list] as const;
});

/** The 8 groups of an IPv6 address (a trailing dotted quad counted as two), or undefined. */
function groups(ip: string): number[] | undefined {
  let text = ip.toLowerCase();
  const quad = /(\d+\.\d+\.\d+\.\d+)$/.exec(text)?.[1];
  if (quad !== undefined) {
    const [a = 0, b = 0, c = 0, d = 0] = quad.split('.').map(Number);
    text = `${text.slice(0, -quad.length)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, tail, ...rest] = text.split('::');
  if (rest.length > 0 || head === undefined) return undefined;
  const left = head === '' ? [] : head.split(':');
  const right = tail === undefined || tail === '' ? [] : tail.split(':');
  const fill = tail === undefined ? 0 : 8 - left.length - right.length;
  const all = [...left, ...Array<string>(Math.max(fill, 0)).fill('0'), ...right].map((g) => Number.parseInt(g, 16));
  return all.length === 8 && all.every((g) => g >= 0 && g <= 0xffff) ? all : undefined;
}

const v4 = (hi: number, lo: number) => `${hi >> 8}.${hi & 0xff}.${lo >> 8}.${lo & 0xff}`;

/** The IPv4 address an IPv6 one carries (mapped, compatible, NAT64 64:ff9b::/96, 6to4), if any. */
export function embeddedIPv4(ip: string): string | undefined {
  const g = groups(ip);
  if (!g) return undefined;
  const zeros = (from: number, to: number) => g.slice(from, to).every((x) => x === 0);
  if (zeros(0, 5) && (g[5] === 0xffff || g[5] === 0)) return v4(g[6]!, g[7]!);
  if (g[0] === 0x64 && g[1] === 0xff9b && zeros(2, 6)) return v4(g[6]!, g[7]!);
  if (g[0] === 0x2002) return v4(g[1]!, g[2]!);
  return undefined;
}

/**
 * Why a webhook may not go to this IP address (e.g. `loopback`), or undefined for a public one.
 * Anything that is not an IP address is refused as well: callers only ask about addresses.
 */
export function forbiddenAddress(address: string): string | undefined {
  const ip = address.replace(/^\[|\]$/g, '');
  const family = isIPv4(ip) ? 'ipv4' : isIPv6(ip) ? 'ipv6' : undefined;
  if (family === undefined) return 'not an IP address';
  for (const [kind, list] of LISTS) if (list.check(ip, family)) return kind;
  const inner = family === 'ipv6' ? embeddedIPv4(ip) : undefined;
  const carried = inner !== undefined ? forbiddenAddress(inner) : undefined;
  return carried !== undefined ? `${carried}, inside an IPv6 address` : undefined;
}

/** Names that only mean something inside a network: refused before any lookup. */
const INTERNAL_NAMES = new Set(['localhost', 'metadata', 'metadata.google.internal', 'metadata.goog', 'instance-data']);
const INTERNAL_SUFFIXES = ['.localhost', '.local', '.internal', '.home.arpa', '.localdomain', '.intranet', '.lan'];

/**
 * Why a host name (not an IP literal) may not be a webhook target by its name alone: localhost,
 * the metadata service's names, names of a private zone, and one-label names (`metadata`,
 * `redis`), which a resolver completes with the server's own search domains.
 */
export function forbiddenName(hostname: string): string | undefined {
  const name = hostname.toLowerCase().replace(/\.$/, '');
  if (INTERNAL_NAMES.has(name)) return 'an internal name';
  if (INTERNAL_SUFFIXES.some((s) => name.endsWith(s))) return 'a name of a private zone';
  if (!name.includes('.')) return 'a one-label name (completed by the local resolver)';
  return undefined;
}

/** An IP literal as the URL spells it (`127.0.0.1`, `[::1]`), without brackets; undefined for a name. */
export function ipLiteral(hostname: string): string | undefined {
  const bare = hostname.replace(/^\[|\]$/g, '');
  return isIPv4(bare) || isIPv6(bare) ? bare : undefined;
}

// Which addresses a webhook may reach (security issue #35): every spelling of an internal address
// refused, public ones let through, names judged by every address they resolve to (the resolver
// injected: no lookup leaves the machine), and the connect-time lookup refusing a rebound name.
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { Secret } from '../../src/setting-values.js';
import { embeddedIPv4, forbiddenAddress, forbiddenName, type Resolve } from '../../src/webhooks/address.js';
import { deliveryFailure, failureText } from '../../src/webhooks/deliveries.js';
import { guardedLookup, WebhookSender } from '../../src/webhooks/sender.js';
import { checkCallbackTarget, checkCallbackUrl, hostNamedExactly } from '../../src/webhooks/target.js';

const secret = new Secret(`whsec_${Buffer.alloc(32, 7).toString('base64')}`);
const settings = (allow: string[] = []) => ({ allow, secret, timeoutMs: 1_000 });
const table =
  (answers: Record<string, string[]>): Resolve =>
  async (name) => {
    const found = answers[name];
    if (!found) throw Object.assign(new Error('not found'), { code: 'ENOTFOUND' });
    return found.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
  };

async function codeOf(promise: Promise<unknown>): Promise<string | undefined> {
  try {
    await promise;
    return undefined;
  } catch (err) {
    return (err as { code?: string }).code;
  }
}

describe('forbiddenAddress', () => {
  it('refuses loopback, private, link-local, CGNAT, unspecified, multicast, broadcast and reserved ranges, in IPv4 and IPv6', () => {
    for (const ip of [
      '127.0.0.1',
      '127.255.255.254',
      '10.0.0.1',
      '172.16.0.1',
      '172.31.255.255',
      '192.168.0.1',
      '169.254.169.254',
      '100.64.0.1',
      '100.127.255.255',
      '0.0.0.0',
      '224.0.0.251',
      '239.255.255.250',
      '255.255.255.255',
      '240.0.0.1',
      '198.18.0.1',
      '192.0.2.1',
      '::',
      '::1',
      'fc00::1',
      'fd12:3456::1',
      'fe80::1',
      'febf::1',
      'ff02::1',
      '2001:db8::1',
    ])
      expect(forbiddenAddress(ip), ip).toBeDefined();
    expect(forbiddenAddress('169.254.169.254')).toMatch(/link-local/);
    expect(forbiddenAddress('100.64.0.1')).toMatch(/CGNAT/);
  });

  it('judges IPv6 forms that carry an IPv4 address by that address: mapped, compatible, NAT64, 6to4', () => {
    for (const ip of [
      '::ffff:a9fe:a9fe',
      '::ffff:169.254.169.254',
      '::ffff:7f00:1',
      '::127.0.0.1',
      '::a00:1',
      '64:ff9b::a9fe:a9fe',
      '64:ff9b::10.0.0.1',
      '2002:a9fe:a9fe::1',
      '2002:0a00:0001::',
    ])
      expect(forbiddenAddress(ip), ip).toBeDefined();
    expect(embeddedIPv4('::ffff:a9fe:a9fe')).toBe('169.254.169.254');
    expect(embeddedIPv4('64:ff9b::a9fe:a9fe')).toBe('169.254.169.254');
    expect(embeddedIPv4('2002:a9fe:a9fe::1')).toBe('169.254.169.254');
    // A public address carried the same way is public.
    expect(forbiddenAddress('::ffff:93.184.215.14')).toBeUndefined();
    expect(forbiddenAddress('64:ff9b::5db8:d70e')).toBeUndefined();
  });

  it('lets public addresses through, and refuses what is not an address', () => {
    for (const ip of ['93.184.215.14', '8.8.8.8', '100.63.255.255', '100.128.0.1', '172.32.0.1', '2606:4700::1111'])
      expect(forbiddenAddress(ip), ip).toBeUndefined();
    expect(forbiddenAddress('example.com')).toBeDefined();
  });
});

describe('forbiddenName', () => {
  it('refuses localhost, the metadata names, private zones and one-label names; a public name passes to resolution', () => {
    for (const name of [
      'localhost',
      'LOCALHOST.',
      'a.localhost',
      'metadata',
      'metadata.google.internal',
      'metadata.google.internal.',
      'metadata.goog',
      'anything.internal',
      'printer.local',
      'router.home.arpa',
      'redis',
    ])
      expect(forbiddenName(name), name).toBeDefined();
    expect(forbiddenName('hooks.example.com')).toBeUndefined();
  });
});

describe('checkCallbackUrl and checkCallbackTarget', () => {
  it('refuses the five URLs of the penetration test at once, without a lookup', async () => {
    const lookups: string[] = [];
    const resolve: Resolve = async (name) => {
      lookups.push(name);
      return [{ address: '93.184.215.14', family: 4 }];
    };
    for (const url of [
      'http://169.254.169.254/latest/meta-data/',
      'http://10.0.0.1:6379/',
      'http://2852039166/',
      'http://[::ffff:a9fe:a9fe]/',
      'http://metadata.google.internal/',
    ]) {
      expect(() => checkCallbackUrl(url, settings()), url).toThrow(
        expect.objectContaining({ code: 'CALLBACK_ADDRESS_FORBIDDEN' }),
      );
      expect(await codeOf(checkCallbackTarget(url, settings(), resolve)), url).toBe('CALLBACK_ADDRESS_FORBIDDEN');
    }
    expect(lookups).toEqual([]);
  });

  it('resolves a name and refuses it when any of its addresses is internal', async () => {
    const resolve = table({
      'hooks.customer.test': ['93.184.215.14'],
      'loop.customer.test': ['127.0.0.1'],
      'both.customer.test': ['93.184.215.14', '192.168.1.10'],
      'v6.customer.test': ['2606:4700::1111', 'fe80::1'],
    });
    expect(await checkCallbackTarget('https://hooks.customer.test/x', settings(), resolve)).toBe(
      'https://hooks.customer.test/x',
    );
    for (const host of ['loop', 'both', 'v6'])
      expect(await codeOf(checkCallbackTarget(`https://${host}.customer.test/`, settings(), resolve))).toBe(
        'CALLBACK_ADDRESS_FORBIDDEN',
      );
    expect(await codeOf(checkCallbackTarget('https://none.customer.test/', settings(), resolve))).toBe(
      'CALLBACK_HOST_UNRESOLVED',
    );
    // A lookup that never answers is bounded by VQ_WEBHOOK_TIMEOUT.
    const never: Resolve = () => new Promise(() => {});
    expect(
      await codeOf(checkCallbackTarget('https://slow.customer.test/', { ...settings(), timeoutMs: 20 }, never)),
    ).toBe('CALLBACK_HOST_UNRESOLVED');
  });

  it('an internal host is allowed only when VQ_WEBHOOK_ALLOW names it exactly; a wildcard never opens one', async () => {
    const resolve = table({ 'hooks.corp.test': ['10.1.2.3'] });
    expect(checkCallbackUrl('http://127.0.0.1:4321/hooks', settings(['127.0.0.1:4321']))).toBe(
      'http://127.0.0.1:4321/hooks',
    );
    expect(checkCallbackUrl('http://127.0.0.1:9999/', settings(['127.0.0.1']))).toBe('http://127.0.0.1:9999/');
    expect(await checkCallbackTarget('http://hooks.corp.test/', settings(['hooks.corp.test']), resolve)).toBe(
      'http://hooks.corp.test/',
    );
    expect(await codeOf(checkCallbackTarget('http://hooks.corp.test/', settings(['*.corp.test']), resolve))).toBe(
      'CALLBACK_ADDRESS_FORBIDDEN',
    );
    expect(hostNamedExactly('127.0.0.1:4321', ['127.0.0.1:4321'])).toBe(true);
    expect(hostNamedExactly('127.0.0.1:4322', ['127.0.0.1:4321'])).toBe(false);
    expect(hostNamedExactly('a.corp.test', ['*.corp.test'])).toBe(false);
    expect(hostNamedExactly('anything.test', [])).toBe(false);
  });
});

describe("the operator's own targets (VQ_WEBHOOK_URL, VQ_INBOX_NOTIFY_URL)", () => {
  it('an internal literal or name stops start-up unless VQ_WEBHOOK_ALLOW names that host exactly', () => {
    const base = { VQ_WEBHOOK_SECRET: secret.reveal() };
    expect(() => loadConfig({ ...base, VQ_WEBHOOK_URL: 'http://169.254.169.254/' })).toThrow(/VQ_WEBHOOK_ALLOW/);
    expect(() => loadConfig({ ...base, VQ_INBOX_NOTIFY_URL: 'http://localhost:9000/' })).toThrow(/VQ_WEBHOOK_ALLOW/);
    expect(() => loadConfig({ ...base, VQ_WEBHOOK_ALLOW: '*.0.0.1', VQ_WEBHOOK_URL: 'http://127.0.0.1/' })).toThrow(
      /loopback/,
    );
    const named = loadConfig({ ...base, VQ_WEBHOOK_ALLOW: '127.0.0.1', VQ_WEBHOOK_URL: 'http://127.0.0.1:9000/' });
    expect(named.webhooks.url).toBe('http://127.0.0.1:9000/');
  });
});

describe('at send time', () => {
  it('the connect-time lookup refuses a name that now resolves to an internal address (rebinding) and passes a public one', async () => {
    const lookup = guardedLookup(
      table({ 'rebind.test': ['93.184.215.14', '127.0.0.1'], 'ok.test': ['93.184.215.14'] }),
      false,
    );
    const run = (name: string, all: boolean) =>
      new Promise<{ err: NodeJS.ErrnoException | null; address: unknown }>((done) =>
        lookup(name, { all }, (err, address) => done({ err, address })),
      );
    expect((await run('rebind.test', true)).err?.code).toBe('CALLBACK_ADDRESS_FORBIDDEN');
    expect((await run('rebind.test', false)).err?.code).toBe('CALLBACK_ADDRESS_FORBIDDEN');
    expect(await run('ok.test', true)).toEqual({ err: null, address: [{ address: '93.184.215.14', family: 4 }] });
    expect(await run('ok.test', false)).toEqual({ err: null, address: '93.184.215.14' });
  });

  it('a stored URL with an internal literal address is not sent: refused_address before any connection', async () => {
    const sender = new WebhookSender({ secret, timeoutMs: 1_000, allow: [] });
    try {
      const result = await sender.send({
        id: 'msg_x',
        type: 'batch.finished',
        url: 'http://10.0.0.1:6379/',
        body: '{}',
      });
      expect(result).toMatchObject({ ok: false, failure: 'refused_address' });
    } finally {
      await sender.close();
    }
  });

  it('a delivery status written before categories (socket words) is shown as `failed`', () => {
    expect(deliveryFailure('could not reach the receiver: ECONNREFUSED (connect ECONNREFUSED 10.0.0.1:6379)')).toBe(
      'failed',
    );
    expect(deliveryFailure('timeout')).toBe('timeout');
    expect(failureText('connect_failed')).toBe('connect_failed (no connection could be made to the receiver)');
  });
});

import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { LookupAddress } from 'node:dns';
import { networkInterfaces } from 'node:os';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOutboundClient, type LookupFunction } from './client.js';
import { OutboundError } from './errors.js';
import { isBlockedAddress } from './addresses.js';
import { hostAllowed } from './allowlist.js';

/** An injected resolver: names → addresses; records every call. No real DNS is used. */
function fakeDns(table: Record<string, string[]>, calls: string[] = []): LookupFunction {
  return ((hostname: string, _opts: unknown, cb: (err: NodeJS.ErrnoException | null, a: LookupAddress[]) => void) => {
    calls.push(hostname);
    const answer = table[hostname.toLowerCase().replace(/\.$/, '')];
    if (!answer) return cb(Object.assign(new Error('not found'), { code: 'ENOTFOUND' }), []);
    cb(
      null,
      answer.map((address) => ({ address, family: address.includes(':') ? 6 : 4 })),
    );
  }) as unknown as LookupFunction;
}

async function refusal(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (err) {
    if (err instanceof OutboundError) return err.code;
    throw err;
  }
  return 'allowed';
}

// Every name resolves to a private address here, so a name that slips through a check is still
// refused at connect time: no test can reach a non-loopback address.
const PRIVATE_DNS = fakeDns({
  localhost: ['127.0.0.1'],
  'metadata.google.internal': ['169.254.169.254'],
  'public.example': ['10.0.0.7'],
  'mixed.example': ['93.184.216.34', '10.0.0.8'],
  'v6.example': ['::1'],
  'mapped.example': ['::ffff:10.0.0.1'],
  'linklocal6.example': ['fe80::1'],
  'ula.example': ['fd00::1'],
  'cgnat.example': ['100.64.1.1'],
  // IPv6 forms that carry an IPv4 address, answered by DNS (judged at connect time, in the lookup)
  'nat64.example': ['64:ff9b::a9fe:a9fe'],
  '6to4.example': ['2002:a00:1::1'],
  'compat.example': ['::a00:1'],
  'translated.example': ['::ffff:0:7f00:1'],
  'mapped-public.example': ['::ffff:8.8.8.8'],
  'teredo.example': ['2001:0:4136:e378:8000:63bf:80ff:fffe'],
  'multicast6.example': ['ff02::1'],
});

const BLOCKED_URLS: [string, string][] = [
  ['http://127.0.0.1/', 'address_blocked'],
  ['http://127.1/', 'address_blocked'],
  ['http://127.0.1/', 'address_blocked'],
  ['http://2130706433/', 'address_blocked'],
  ['http://0x7f000001/', 'address_blocked'],
  ['http://0x7f.0x0.0x0.0x1/', 'address_blocked'],
  ['http://0177.0.0.1/', 'address_blocked'],
  ['http://0177.0000.0000.0001/', 'address_blocked'],
  ['http://127.000.000.001/', 'address_blocked'],
  ['http://0.0.0.0/', 'address_blocked'],
  ['http://0/', 'address_blocked'],
  ['http://[::1]/', 'address_blocked'],
  ['http://[::]/', 'address_blocked'],
  ['http://[0:0:0:0:0:0:0:1]/', 'address_blocked'],
  ['http://[0000:0000:0000:0000:0000:0000:0000:0001]/', 'address_blocked'],
  ['http://[::ffff:127.0.0.1]/', 'address_blocked'],
  ['http://[::ffff:7f00:1]/', 'address_blocked'],
  ['http://[::ffff:169.254.169.254]/', 'address_blocked'],
  ['http://[::ffff:a9fe:a9fe]/', 'address_blocked'],
  ['http://169.254.169.254/latest/meta-data/', 'address_blocked'],
  ['http://2852039166/', 'address_blocked'],
  ['http://0xa9fea9fe/', 'address_blocked'],
  ['http://0251.0376.0251.0376/', 'address_blocked'],
  ['http://169.254.43518/', 'address_blocked'],
  ['http://0xa9.0xfe.0xa9.0xfe/', 'address_blocked'],
  ['http://10.0.0.1/', 'address_blocked'],
  ['http://10.1/', 'address_blocked'],
  ['http://167772161/', 'address_blocked'],
  ['http://172.16.0.1/', 'address_blocked'],
  ['http://172.31.255.254/', 'address_blocked'],
  ['http://192.168.1.1/', 'address_blocked'],
  ['http://100.64.0.1/', 'address_blocked'],
  ['http://198.18.0.1/', 'address_blocked'],
  ['http://198.19.255.1/', 'address_blocked'],
  ['http://192.0.0.8/', 'address_blocked'],
  ['http://224.0.0.1/', 'address_blocked'],
  ['http://239.255.255.250/', 'address_blocked'],
  ['http://240.0.0.1/', 'address_blocked'],
  ['http://255.255.255.255/', 'address_blocked'],
  ['http://[fc00::1]/', 'address_blocked'],
  ['http://[fd12:3456::1]/', 'address_blocked'],
  ['http://[fe80::1]/', 'address_blocked'],
  ['https://127.0.0.1:8443/', 'address_blocked'],
  ['http://127.0.0.1#@public.example/', 'address_blocked'],
  ['http://127.0.0.1:80\\@public.example/', 'address_blocked'],
  ['http://public.example@127.0.0.1/', 'invalid_url'],
  ['http://user:pass@public.example/', 'invalid_url'],
  ['http://public.example\\@127.0.0.1/', 'address_blocked'],
  ['http://localhost/', 'address_blocked'],
  ['http://LOCALHOST./', 'address_blocked'],
  ['http://metadata.google.internal/computeMetadata/v1/', 'address_blocked'],
  ['http://public.example/', 'address_blocked'],
  ['http://mixed.example/', 'address_blocked'],
  ['http://v6.example/', 'address_blocked'],
  ['http://mapped.example/', 'address_blocked'],
  ['http://linklocal6.example/', 'address_blocked'],
  ['http://ula.example/', 'address_blocked'],
  ['http://cgnat.example/', 'address_blocked'],
  ['http://unknown.invalid/', 'dns_failed'],
  ['file:///etc/passwd', 'scheme_not_allowed'],
  ['ftp://public.example/', 'scheme_not_allowed'],
  ['gopher://127.0.0.1:6379/_INFO', 'scheme_not_allowed'],
  ['dict://127.0.0.1:11211/', 'scheme_not_allowed'],
  ['ws://public.example/', 'scheme_not_allowed'],
  ['data:text/plain,hello', 'scheme_not_allowed'],
  ['javascript:alert(1)', 'scheme_not_allowed'],
  ['not a url', 'invalid_url'],
  ['http://', 'invalid_url'],
  ['http://[fe80::1%25eth0]/', 'invalid_url'],
  // NAT64 64:ff9b::/96: judged by the IPv4 address in the last 32 bits
  ['http://[64:ff9b::127.0.0.1]/', 'address_blocked'],
  ['http://[64:ff9b::7f00:1]/', 'address_blocked'],
  ['http://[64:ff9b::169.254.169.254]/latest/meta-data/', 'address_blocked'],
  ['http://[64:ff9b::a9fe:a9fe]/', 'address_blocked'],
  ['http://[64:ff9b::10.0.0.1]/', 'address_blocked'],
  ['http://[0064:ff9b:0000:0000:0000:0000:c0a8:0001]/', 'address_blocked'],
  ['http://[64:FF9B::AC10:1]/', 'address_blocked'],
  ['http://[64:ff9b::0.0.0.0]/', 'address_blocked'],
  ['http://[64:ff9b::6440:1]:8443/', 'address_blocked'],
  ['http://[64:ff9b::c0a8:101]:80/x', 'address_blocked'],
  ['http://[64:ff9b::e000:1]/', 'address_blocked'],
  // 6to4 2002::/16: judged by the IPv4 address in bits 16–47
  ['http://[2002:7f00:1::]/', 'address_blocked'],
  ['http://[2002:7f00:1::1]:8080/', 'address_blocked'],
  ['http://[2002:a9fe:a9fe::1]/', 'address_blocked'],
  ['http://[2002:0a00:0001:0000:0000:0000:0000:0001]/', 'address_blocked'],
  ['http://[2002:c0a8:101::]/', 'address_blocked'],
  ['http://[2002:C612:1::]/', 'address_blocked'],
  ['http://[2002:6440::]/', 'address_blocked'],
  ['http://[2002:0:1::]/', 'address_blocked'],
  // IPv4-compatible ::a.b.c.d
  ['http://[::127.0.0.1]/', 'address_blocked'],
  ['http://[::7f00:1]/', 'address_blocked'],
  ['http://[::169.254.169.254]/', 'address_blocked'],
  ['http://[0:0:0:0:0:0:a00:1]/', 'address_blocked'],
  ['http://[::0.0.0.0]/', 'address_blocked'],
  ['http://[::0.0.0.2]/', 'address_blocked'],
  // IPv4-mapped ::ffff:0:0/96 is blocked as a whole, public IPv4 inside or not (SEED, docs/contract/spec.md §8.5)
  ['http://[::ffff:8.8.8.8]/', 'address_blocked'],
  ['http://[::ffff:808:808]/', 'address_blocked'],
  ['http://[0:0:0:0:0:ffff:127.0.0.1]/', 'address_blocked'],
  ['http://[::FFFF:10.0.0.1]/', 'address_blocked'],
  // beyond the SPEC list: IPv4-translated, Teredo, IPv6 multicast, local-use NAT64
  ['http://[::ffff:0:127.0.0.1]/', 'address_blocked'],
  ['http://[::ffff:0:a9fe:a9fe]/', 'address_blocked'],
  ['http://[2001:0:4136:e378:8000:63bf:80ff:fffe]/', 'address_blocked'],
  ['http://[2001:0:a00:1::1]/', 'address_blocked'],
  ['http://[ff02::1]/', 'address_blocked'],
  ['http://[64:ff9b:1::8.8.8.8]/', 'address_blocked'],
  // the same forms as DNS answers
  ['http://nat64.example/', 'address_blocked'],
  ['http://6to4.example/', 'address_blocked'],
  ['http://compat.example/', 'address_blocked'],
  ['http://translated.example/', 'address_blocked'],
  ['http://mapped-public.example/', 'address_blocked'],
  ['http://teredo.example/', 'address_blocked'],
  ['http://multicast6.example/', 'address_blocked'],
];

describe('SSRF corpus: refused before any connection to a non-loopback address', () => {
  const client = createOutboundClient({ lookup: PRIVATE_DNS, timeoutMs: 3000 });
  afterAll(() => client.close());

  it('has at least 110 cases', () => {
    expect(BLOCKED_URLS.length).toBeGreaterThanOrEqual(110);
  });

  it.each(BLOCKED_URLS)('%s → %s', async (url, code) => {
    expect(await refusal(client.fetch(url))).toBe(code);
  });
});

describe('address classes', () => {
  it('blocks the 16 ranges and nothing public', () => {
    for (const a of [
      '0.1.2.3',
      '10.9.9.9',
      '100.127.0.1',
      '127.255.0.1',
      '169.254.0.1',
      '172.20.0.1',
      '192.0.0.255',
      '192.168.0.1',
      '198.18.5.5',
      '224.1.1.1',
      '250.0.0.1',
      '::',
      '::1',
      '::ffff:1.2.3.4',
      'fc00::',
      'fdff::1',
      'fe80::abcd',
      'febf::1',
    ]) {
      expect(isBlockedAddress(a), a).toBe(true);
    }
    for (const a of [
      '8.8.8.8',
      '1.1.1.1',
      '100.63.255.255',
      '100.128.0.1',
      '172.15.255.255',
      '172.32.0.1',
      '192.0.1.1',
      '198.17.255.255',
      '198.20.0.1',
      '223.255.255.255',
      '2001:4860:4860::8888',
      'fec0::1',
    ]) {
      expect(isBlockedAddress(a), a).toBe(false);
    }
  });

  it("blocks this machine's own addresses, whatever their range, also inside IPv6 forms (decision 0250)", () => {
    // (Here one of them is in a range the SPEC list leaves open: 192.0.2.0/24.)
    const own = Object.values(networkInterfaces()).flatMap((list) => (list ?? []).map((e) => e.address));
    expect(own.length).toBeGreaterThan(0);
    for (const a of own) expect(isBlockedAddress(a), a).toBe(true);
    for (const a of own.filter((x) => !x.includes(':'))) expect(isBlockedAddress(`64:ff9b::${a}`), `64:ff9b::${a}`).toBe(true);
  });

  it('judges IPv6 forms that embed an IPv4 address by that address; ::ffff:0:0/96 is blocked whole', () => {
    // [embedded private or special → blocked, embedded public → allowed]
    const pairs: [string, string][] = [
      ['64:ff9b::7f00:1', '64:ff9b::808:808'],
      ['64:ff9b::10.1.2.3', '64:ff9b::8.8.8.8'],
      ['64:ff9b::a9fe:a9fe', '64:ff9b::101:101'],
      ['2002:a9fe:a9fe::', '2002:808:808::'],
      ['2002:ac10:1:ffff:ffff:ffff:ffff:ffff', '2002:ac20:1:ffff:ffff:ffff:ffff:ffff'],
      ['::7f00:1', '::808:808'],
      ['::192.168.0.1', '::1.1.1.1'],
      ['0:0:0:0:0:0:127.0.0.1', '0:0:0:0:0:0:8.8.8.8'],
      ['::ffff:0:a00:1', '::ffff:0:808:808'],
      ['2001:0:4136:e378:8000:63bf:80ff:fffe', '2001:0:4136:e378:8000:63bf:3fff:fdd2'],
      ['2001:0:a00:1:8000:63bf:3fff:fdd2', '2001:0:4136:e378:8000:63bf:3fff:fdd2'],
    ];
    for (const [blocked, allowed] of pairs) {
      expect(isBlockedAddress(blocked), blocked).toBe(true);
      expect(isBlockedAddress(allowed), allowed).toBe(false);
    }
    // edges of the embedding ranges: a neighbour outside the range is an ordinary address
    expect(isBlockedAddress('64:ff9b::1:7f00:1')).toBe(false); // not in 64:ff9b::/96
    expect(isBlockedAddress('2003:7f00:1::')).toBe(false); // not 6to4
    expect(isBlockedAddress('1::7f00:1')).toBe(false); // not IPv4-compatible
    // IPv4-mapped: blocked whatever it carries
    for (const a of ['::ffff:8.8.8.8', '::ffff:808:808', '::ffff:1.1.1.1', '::ffff:0.0.0.0', '::ffff:255.255.255.255'])
      expect(isBlockedAddress(a), a).toBe(true);
    // beyond the SPEC list: IPv6 multicast and the local-use NAT64 prefix
    for (const a of ['ff02::1', 'ff0e::8.8.8.8', '64:ff9b:1::808:808']) expect(isBlockedAddress(a), a).toBe(true);
    // the literal forms a socket or a resolver may report: brackets, zone id, upper case, full form
    for (const a of ['[64:ff9b::7f00:1]', '64:FF9B::7F00:1', '0064:ff9b:0000:0000:0000:0000:7f00:0001', '::7f00:1%lo'])
      expect(isBlockedAddress(a), a).toBe(true);
  });

  it('lets only 127.0.0.0/8 and ::1 through with allowLoopback, not loopback inside another form', () => {
    expect(isBlockedAddress('127.0.0.1', true)).toBe(false);
    expect(isBlockedAddress('127.8.9.10', true)).toBe(false);
    expect(isBlockedAddress('::1', true)).toBe(false);
    for (const a of [
      '10.0.0.1',
      '169.254.169.254',
      '0.0.0.0',
      '::',
      'fe80::1',
      '192.168.0.1',
      '::ffff:127.0.0.1',
      '64:ff9b::127.0.0.1',
      '2002:7f00:1::',
      '::127.0.0.1',
      '::ffff:0:127.0.0.1',
    ]) {
      expect(isBlockedAddress(a, true), a).toBe(true);
    }
  });
});

describe('allowlist matching', () => {
  const cases: [string, string[], boolean][] = [
    ['example.com', ['example.com'], true],
    ['a.example.com', ['example.com'], false],
    ['example.com', ['.example.com'], true],
    ['a.b.example.com', ['.example.com'], true],
    ['badexample.com', ['.example.com'], false],
    ['example.com.evil.net', ['.example.com'], false],
    ['example.com', ['*.example.com'], false],
    ['a.example.com', ['*.example.com'], true],
    ['a.b.c.example.com', ['*.example.com'], true],
    ['EXAMPLE.com', ['example.COM'], true],
    ['example.com.', ['example.com'], true],
    ['example.com', ['example.com.'], true],
    ['bücher.example', ['xn--bcher-kva.example'], true],
    ['xn--bcher-kva.example', ['bücher.example'], true],
    ['exаmple.com', ['example.com'], false],
    ['anything.net', [], true],
    ['other.org', ['example.com', '*.other.org'], false],
    ['x.other.org', ['example.com', '*.other.org'], true],
  ];
  it.each(cases)('%s with %j → %s', (host, list, allowed) => {
    expect(hostAllowed(host, list)).toBe(allowed);
  });
  it('refuses a host outside the allowlist with host_not_allowed', async () => {
    const c = createOutboundClient({ allowlist: ['.example.com'], lookup: PRIVATE_DNS });
    expect(await refusal(c.fetch('http://badexample.com/'))).toBe('host_not_allowed');
    // allowlisted hosts still get the address check
    expect(await refusal(c.fetch('http://example.com/'))).toBe('dns_failed');
    await c.close();
  });
});

describe('against loopback test servers (allowLoopback, tests only)', () => {
  let server: Server;
  let base: string;
  const seen: IncomingMessage[] = [];
  beforeAll(async () => {
    server = createServer((req, res) => {
      seen.push(req);
      const u = new URL(req.url ?? '/', 'http://x');
      const hop = Number(u.searchParams.get('hop') ?? 0);
      switch (u.pathname) {
        case '/chain':
          res.writeHead(302, { location: hop + 1 >= Number(u.searchParams.get('n')) ? '/ok' : `/chain?n=${u.searchParams.get('n')}&hop=${hop + 1}` });
          return res.end();
        case '/to-private':
          res.writeHead(302, { location: 'http://10.0.0.1/secret' });
          return res.end();
        case '/to-metadata-name':
          res.writeHead(301, { location: 'http://metadata.google.internal/' });
          return res.end();
        case '/to-file':
          res.writeHead(307, { location: 'file:///etc/passwd' });
          return res.end();
        case '/to-other-host':
          res.writeHead(302, { location: `http://otherhost.test:${(server.address() as { port: number }).port}/echo` });
          return res.end();
        case '/slow':
          setTimeout(() => res.end('late'), 2000);
          return;
        case '/drip': {
          // Headers at once, then a byte every 100 ms: each gap is short, the whole is not.
          res.writeHead(200, { 'content-type': 'text/plain' });
          const timer = setInterval(() => res.write('x'), 100);
          setTimeout(() => {
            clearInterval(timer);
            res.end();
          }, 3000);
          return;
        }
        case '/big':
          return res.end(Buffer.alloc(5000, 65));
        case '/echo':
          return res.end(JSON.stringify({ url: req.url, authorization: req.headers.authorization ?? null, host: req.headers.host }));
        default:
          return res.end('ok');
      }
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));

  const loopbackDns = fakeDns({ 'otherhost.test': ['127.0.0.1'], 'metadata.google.internal': ['169.254.169.254'], 'cluster.test': ['127.0.0.1'] });
  const make = (extra = {}) => createOutboundClient({ allowLoopback: true, lookup: loopbackDns, timeoutMs: 1000, ...extra });

  it('fetches, follows up to maxRedirects, and refuses one more', async () => {
    const c = make();
    const ok = await c.fetch(`${base}/chain?n=5`);
    expect(ok).toMatchObject({ status: 200, body: 'ok', redirects: 5, truncated: false });
    expect(await refusal(c.fetch(`${base}/chain?n=6`))).toBe('too_many_redirects');
    expect(await refusal(make({ maxRedirects: 0 }).fetch(`${base}/chain?n=1`))).toBe('too_many_redirects');
    await c.close();
  });

  it('checks every hop: private address, private name, other scheme, host outside the allowlist', async () => {
    const c = make();
    expect(await refusal(c.fetch(`${base}/to-private`))).toBe('address_blocked');
    expect(await refusal(c.fetch(`${base}/to-metadata-name`))).toBe('address_blocked');
    expect(await refusal(c.fetch(`${base}/to-file`))).toBe('scheme_not_allowed');
    const listed = make({ allowlist: ['127.0.0.1'] });
    expect(await refusal(listed.fetch(`${base}/to-other-host`))).toBe('host_not_allowed');
    await c.close();
    await listed.close();
  });

  it('applies one timeout to the whole chain, body included', async () => {
    expect(await refusal(make().fetch(`${base}/slow`))).toBe('timeout');
    const started = Date.now();
    expect(await refusal(make().fetch(`${base}/drip`))).toBe('timeout');
    expect(Date.now() - started).toBeLessThan(2000);
  });

  it('truncates bodies at maxResponseBytes, or refuses them when truncation is off', async () => {
    const res = await make({ maxResponseBytes: 1000 }).fetch(`${base}/big`);
    expect(res.truncated).toBe(true);
    expect(res.body).toHaveLength(1000);
    expect(await refusal(make({ maxResponseBytes: 1000, truncate: false }).fetch(`${base}/big`))).toBe('response_too_large');
  });

  it('adds user.name for simple auth and keeps Basic auth on a redirect to another host', async () => {
    type Echo = { url: string; host: string; authorization: string | null };
    const simple = JSON.parse((await make().fetch(`${base}/echo?x=1`, { auth: { type: 'simple', username: 'alice' } })).body) as Echo;
    expect(simple.url).toBe('/echo?x=1&user.name=alice');
    expect(simple.authorization).toBeNull();
    const basic = JSON.parse((await make().fetch(`${base}/to-other-host`, { auth: { type: 'basic', username: 'bob', password: 's3cret' } })).body) as Echo;
    expect(basic.host).toMatch(/^otherhost\.test:/);
    expect(basic.authorization).toBe(`Basic ${Buffer.from('bob:s3cret').toString('base64')}`);
  });

  it('rebinding: the address that is checked is the address that is connected to', async () => {
    // A name answering public first and private next would beat a client that resolves to
    // check and resolves again to connect. This client resolves once, at connect time, and
    // checks that very answer: the second (private) answer is refused, never connected to.
    const calls: string[] = [];
    let n = 0;
    const rebinding = ((host: string, _o: unknown, cb: (e: null, a: LookupAddress[]) => void) => {
      calls.push(host);
      n += 1;
      cb(null, [{ address: n === 1 ? '127.0.0.1' : '10.0.0.1', family: 4 }]);
    }) as unknown as LookupFunction;
    const c = createOutboundClient({ allowLoopback: true, lookup: rebinding, timeoutMs: 1000 });
    const port = (server.address() as { port: number }).port;
    expect((await c.fetch(`http://rebind.test:${port}/`)).status).toBe(200);
    await c.close();
    const again = createOutboundClient({ allowLoopback: true, lookup: rebinding, timeoutMs: 1000 });
    expect(await refusal(again.fetch(`http://rebind.test:${port}/`))).toBe('address_blocked');
    expect(calls).toEqual(['rebind.test', 'rebind.test']);
    await again.close();
  });
});

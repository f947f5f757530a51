import { isIPv6 } from 'node:net';
import { networkInterfaces } from 'node:os';
import ipaddr from 'ipaddr.js';

type Address = ipaddr.IPv4 | ipaddr.IPv6;

/** docs/contract/spec.md §8.5: never connected to, whatever the name resolves to. */
export const BLOCKED_RANGES = [
  '0.0.0.0/8',
  '10.0.0.0/8',
  '100.64.0.0/10',
  '127.0.0.0/8',
  '169.254.0.0/16',
  '172.16.0.0/12',
  '192.0.0.0/24',
  '192.168.0.0/16',
  '198.18.0.0/15',
  '224.0.0.0/4',
  '240.0.0.0/4',
  '::/128',
  '::1/128',
  '::ffff:0:0/96',
  'fc00::/7',
  'fe80::/10',
] as const;

/**
 * Blocked beyond the SPEC list (docs/decisions/0020-outbound-embedded-ipv4.md): IPv6 multicast
 * (the counterpart of 224.0.0.0/4) and the local-use NAT64 prefix of RFC 8215, which is never
 * globally reachable and whose IPv4 position depends on a prefix length we cannot know.
 */
export const EXTRA_BLOCKED_RANGES = ['ff00::/8', '64:ff9b:1::/48'] as const;

/**
 * IPv6 forms that carry an IPv4 address, and where (docs/contract/spec.md §8.5): such an address is judged by
 * the IPv4 address inside, so `64:ff9b::10.0.0.1` is as blocked as `10.0.0.1`.
 * `::ffff:0:0/96` (IPv4-mapped) is not here: it is blocked as a whole.
 */
const EMBEDDING: { range: string; ipv4: (parts: number[]) => number[][] }[] = [
  // NAT64 well-known prefix (RFC 6052): the last 32 bits.
  { range: '64:ff9b::/96', ipv4: (p) => [[p[6]!, p[7]!]] },
  // 6to4 (RFC 3056): bits 16–47.
  { range: '2002::/16', ipv4: (p) => [[p[1]!, p[2]!]] },
  // IPv4-compatible (RFC 4291, deprecated): `::a.b.c.d`; `::` and `::1` are matched by their own ranges first.
  { range: '::/96', ipv4: (p) => [[p[6]!, p[7]!]] },
  // IPv4-translated (RFC 2765 SIIT): `::ffff:0:a.b.c.d`.
  { range: '::ffff:0:0:0/96', ipv4: (p) => [[p[6]!, p[7]!]] },
  // Teredo (RFC 4380): the server in bits 32–63, the client (bit-inverted) in bits 96–127.
  {
    range: '2001::/32',
    ipv4: (p) => [
      [p[2]!, p[3]!],
      [p[6]! ^ 0xffff, p[7]! ^ 0xffff],
    ],
  },
];

const parse = (cidr: string) => ipaddr.parseCIDR(cidr);
const BLOCKED = [...BLOCKED_RANGES, ...EXTRA_BLOCKED_RANGES].map(parse);
const LOOPBACK = [parse('127.0.0.0/8'), parse('::1/128')];
const EMBEDDED = EMBEDDING.map((e) => ({ cidr: parse(e.range), ipv4: e.ipv4 }));

function inRanges(addr: Address, ranges: [Address, number][]): boolean {
  return ranges.some(([net, bits]) => net.kind() === addr.kind() && addr.match(net, bits));
}

const ipv4Of = ([hi, lo]: number[]) => new ipaddr.IPv4([hi! >> 8, hi! & 0xff, lo! >> 8, lo! & 0xff]);

/**
 * This machine's own addresses, whatever their range (decision 0250): a public address of the
 * host reaches every service bound to all interfaces, and open and closed ports answer apart.
 * Read again at most once a second (interfaces come and go).
 */
let own: { at: number; addresses: Set<string> } | undefined;
function ownAddresses(): Set<string> {
  const now = Date.now();
  if (own === undefined || now - own.at > 1000) {
    const addresses = new Set<string>();
    for (const list of Object.values(networkInterfaces()))
      for (const entry of list ?? []) {
        const parsed = parseAddress(entry.address);
        if (parsed) addresses.add(parsed.toNormalizedString());
      }
    own = { at: now, addresses };
  }
  return own.addresses;
}
const isOwn = (addr: Address) => ownAddresses().has(addr.toNormalizedString());

/**
 * Whether connecting to `address` (a literal IP, as a URL, a socket or DNS gives it) is refused:
 * the ranges above, this machine's own addresses, and the IPv6 forms that embed an IPv4 address
 * judged by that address. With
 * `allowLoopback` (tests only) exactly 127.0.0.0/8 and ::1 are let through; nothing else is,
 * not even loopback carried inside another form (`::ffff:127.0.0.1`, `64:ff9b::127.0.0.1`).
 */
export function isBlockedAddress(address: string, allowLoopback = false): boolean {
  const addr = parseAddress(address);
  if (!addr) return true; // not an address we understand: refuse
  if (allowLoopback && inRanges(addr, LOOPBACK)) return false;
  if (inRanges(addr, BLOCKED) || isOwn(addr)) return true;
  if (addr.kind() === 'ipv6') {
    const parts = (addr as ipaddr.IPv6).parts;
    for (const e of EMBEDDED) {
      if (addr.match(e.cidr) && e.ipv4(parts).some((p) => inRanges(ipv4Of(p), BLOCKED) || isOwn(ipv4Of(p)))) return true;
    }
  }
  return false;
}

/**
 * One reading of an address string. IPv6 goes through the WHATWG URL parser first (the reading
 * the request itself gets): ipaddr.js reads `::1.2.3.4` as `::ffff:1.2.3.4`, which is not what
 * a socket connects to.
 */
function parseAddress(address: string): Address | undefined {
  const bare = address.replace(/^\[|\]$/g, '').replace(/%.*$/, '');
  try {
    if (bare.includes(':')) {
      if (!isIPv6(bare)) return undefined;
      return ipaddr.IPv6.parse(new URL(`http://[${bare}]/`).hostname.slice(1, -1));
    }
    return ipaddr.IPv4.parse(bare);
  } catch {
    return undefined;
  }
}

/** Literal IP host of a parsed URL (brackets removed), or undefined for a name. */
export function literalIp(hostname: string): string | undefined {
  const bare = hostname.replace(/^\[|\]$/g, '');
  return ipaddr.isValid(bare) ? bare : undefined;
}

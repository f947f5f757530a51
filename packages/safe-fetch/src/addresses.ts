import ipaddr from 'ipaddr.js';

/** SPEC §8.5: never connected to, whatever the name resolves to. */
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

const PARSED = BLOCKED_RANGES.map((r) => ipaddr.parseCIDR(r));
const LOOPBACK = [ipaddr.parseCIDR('127.0.0.0/8'), ipaddr.parseCIDR('::1/128')];

function inRanges(addr: ipaddr.IPv4 | ipaddr.IPv6, ranges: [ipaddr.IPv4 | ipaddr.IPv6, number][]): boolean {
  return ranges.some(([net, bits]) => net.kind() === addr.kind() && addr.match(net, bits));
}

/**
 * Whether connecting to `address` (a literal IP, as a socket reports or DNS answers it) is
 * refused. IPv4-mapped IPv6 addresses are judged as the IPv4 address they carry, so
 * `::ffff:127.0.0.1` is loopback and `::ffff:8.8.8.8` is public. With `allowLoopback`
 * (tests only) 127.0.0.0/8 and ::1 are let through; nothing else is.
 */
export function isBlockedAddress(address: string, allowLoopback = false): boolean {
  let addr: ipaddr.IPv4 | ipaddr.IPv6;
  try {
    addr = ipaddr.parse(address.replace(/^\[|\]$/g, '').replace(/%.*$/, ''));
  } catch {
    return true; // not an address we understand: refuse
  }
  if (addr.kind() === 'ipv6' && (addr as ipaddr.IPv6).isIPv4MappedAddress()) addr = (addr as ipaddr.IPv6).toIPv4Address();
  if (allowLoopback && inRanges(addr, LOOPBACK)) return false;
  return inRanges(addr, PARSED);
}

/** Literal IP host of a parsed URL (brackets removed), or undefined for a name. */
export function literalIp(hostname: string): string | undefined {
  const bare = hostname.replace(/^\[|\]$/g, '');
  return ipaddr.isValid(bare) ? bare : undefined;
}

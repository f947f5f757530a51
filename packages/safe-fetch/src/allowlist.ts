import { domainToASCII } from 'node:url';

/** Host as compared: IDNA (punycode) form, lower case, one trailing dot removed. */
export function canonicalHost(host: string): string {
  const trimmed = host.replace(/^\[|\]$/g, '').replace(/\.$/, '');
  const ascii = domainToASCII(trimmed) || trimmed;
  return ascii.toLowerCase();
}

/**
 * docs/contract/spec.md §8.5 allowlist: `example.com` exact; `.example.com` the apex and any subdomain at a dot
 * boundary; `*.example.com` any subdomain at any depth, not the apex. Empty list: any host.
 */
export function hostAllowed(host: string, allowlist: readonly string[]): boolean {
  if (allowlist.length === 0) return true;
  const h = canonicalHost(host);
  return allowlist.some((raw) => {
    const entry = raw.trim();
    if (entry.startsWith('*.')) {
      const base = canonicalHost(entry.slice(2));
      return h.endsWith(`.${base}`);
    }
    if (entry.startsWith('.')) {
      const base = canonicalHost(entry.slice(1));
      return h === base || h.endsWith(`.${base}`);
    }
    return h === canonicalHost(entry);
  });
}

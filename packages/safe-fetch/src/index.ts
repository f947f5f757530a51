export { createOutboundClient } from './client.js';
export type { OutboundClient, OutboundOptions, OutboundRequest, OutboundResponse, AuthAdapter, LookupFunction } from './client.js';
export { OutboundError } from './errors.js';
export type { OutboundErrorCode } from './errors.js';
export { isBlockedAddress, BLOCKED_RANGES } from './addresses.js';
export { hostAllowed, canonicalHost } from './allowlist.js';

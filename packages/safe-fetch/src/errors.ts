export type OutboundErrorCode =
  'invalid_url' | 'scheme_not_allowed' | 'host_not_allowed' | 'address_blocked' | 'too_many_redirects' | 'timeout' | 'response_too_large' | 'dns_failed';

/** A refused or failed outbound request; `code` is one of the ids of docs/contract/spec.md §8.5. */
export class OutboundError extends Error {
  constructor(
    readonly code: OutboundErrorCode,
    message: string,
  ) {
    super(message);
    this.name = 'OutboundError';
  }
}

/** The header that carries INTERNAL_SERVICE_TOKEN; the servers check it with service-kit's internalTokenHook. */
export const INTERNAL_TOKEN_HEADER = 'x-internal-service-token';

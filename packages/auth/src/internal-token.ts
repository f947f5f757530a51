/** The header that carries INTERNAL_SERVICE_TOKEN; the servers check it with service-kit's internalTokenHook. */
export const INTERNAL_TOKEN_HEADER = 'x-internal-service-token';

/**
 * Who the user is: in the answer of the session check (nginx's `auth_request` reads it), and from
 * the gateway to the runtime on `/jupyter/` requests, the user it checked (decision 0251).
 */
export const USER_ID_HEADER = 'x-codeagent-user-id';

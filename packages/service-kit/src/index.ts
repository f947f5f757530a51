// Everything of the database-free half (`@codeagent/service-kit/http`, for the gateway), plus
// what needs the database or is no gateway's business.
export * from './http.js';
export { TooManyRequestsError, QuotaExceededError, PreconditionFailedError, UnsupportedMediaTypeError, RangeNotSatisfiableError } from './errors.js';
export { encodeCursor, decodeCursor, keysetPage, isUuid, ListQuery, listResponse } from './pagination.js';
export type { ListQueryType, ListPage, CursorField, CursorKey } from './pagination.js';
export { MAX_JSON_DEPTH, jsonTextExceedsDepth, ambiguousPathReason } from './request-guards.js';
export { userAuth, type UserScopedCache } from './user-auth.js';
export { HeardCache } from './heard-cache.js';
export type { UserAuthOptions } from './user-auth.js';
export { internalTokenHook, INTERNAL_TOKEN_HEADER } from './internal-token.js';
export type { InternalTokenOptions } from './internal-token.js';

export {
  AppError,
  BadRequestError,
  UnauthorizedError,
  ForbiddenError,
  NotFoundError,
  ConflictError,
  PayloadTooLargeError,
  ServiceUnavailableError,
} from './errors.js';
export { serviceKit, loggerOptions, requestIdOptions } from './plugin.js';
export type { ServiceKitOptions } from './plugin.js';
export { encodeCursor, decodeCursor, keysetPage, isUuid, ListQuery, listResponse } from './pagination.js';
export type { ListQueryType } from './pagination.js';
export { listen } from './listen.js';
export { requestBody } from './body.js';
export { userAuth, SESSION_COOKIE } from './user-auth.js';
export type { UserAuthOptions } from './user-auth.js';

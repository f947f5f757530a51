/**
 * The HTTP half of the kit without user authentication, so without database code: for the
 * gateway, which must never load a database driver (`@codeagent/service-kit/http`).
 */
export {
  AppError,
  BadRequestError,
  UnauthorizedError,
  ForbiddenError,
  NotFoundError,
  ConflictError,
  PayloadTooLargeError,
  ServiceUnavailableError,
  isOutOfSpace,
} from './errors.js';
export type { ErrorBody } from './errors.js';
export { serviceKit, requestIdOf, requestIdOptions } from './plugin.js';
export { ambiguousPathReason } from './request-guards.js';
export { createLogger, isPrettyFormat, loggerOptions, redactUrl, REDACTED } from './logging.js';
export type { ServiceKitOptions } from './plugin.js';
export { listen } from './listen.js';
export { requestBody, lastChunkWhen } from './body.js';
export { hasRequestBody, lingerAfterAnswer, lingerOnEarlyAnswers } from './linger.js';
export type { LingerOptions } from './linger.js';
export { Metrics, opsRoutes, startOpsServer, OPS_PATHS } from './ops.js';
export type { OpsOptions, ReadinessChecks } from './ops.js';
export { WEBDAV_EXTRA_METHODS } from './webdav-methods.js';
export { KeyedLock } from './keyed-lock.js';
export { KeyedSlots } from './keyed-slots.js';
export { freePort } from './ports.js';

/**
 * One error type per failure kind; `plugin.ts` maps them to HTTP in one place (decision 0121).
 * `code` is the `error` field of docs/contract/spec.md §3 bodies (docs/contract/spec.md §8's own strings, `"not found"` and
 * `"validation failed"`, are passed as `code` by the cluster service); `message` is for people;
 * `extra` joins the body; `headers` go on the answer (Retry-After, Content-Range).
 */
export class AppError extends Error {
  readonly headers: Record<string, string> = {};
  constructor(
    readonly statusCode: number,
    readonly code: string,
    message: string,
    readonly extra: Record<string, unknown> = {},
  ) {
    super(message);
    this.name = new.target.name;
  }
}

/**
 * The body of an error answer (docs/contract/spec.md §3) as `plugin.ts` sends it: `error` is the
 * code, `message` for people, and `AppError.extra` joins it (`fields` for a 400). For the code
 * that reads answers: clients and tests.
 */
export interface ErrorBody {
  error: string;
  message: string;
  fields?: Record<string, string>;
}

export class BadRequestError extends AppError {
  constructor(message: string, fields?: Record<string, string>, code = 'invalid_request') {
    super(400, code, message, fields ? { fields } : {});
  }
}

export class UnauthorizedError extends AppError {
  constructor(message = 'authentication required', code = 'unauthorized') {
    super(401, code, message);
  }
}

export class ForbiddenError extends AppError {
  constructor(message = 'you are not allowed to do this') {
    super(403, 'forbidden', message);
  }
}

export class NotFoundError extends AppError {
  constructor(message = 'not found', code = 'not_found') {
    super(404, code, message);
  }
}

export class ConflictError extends AppError {
  constructor(message: string, code = 'conflict') {
    super(409, code, message);
  }
}

/** 412: a condition of the request (WebDAV `Overwrite: F`) does not hold; nothing changed. */
export class PreconditionFailedError extends AppError {
  constructor(message: string) {
    super(412, 'precondition_failed', message);
  }
}

/** 415: the request carries a body of a kind this route does not take. */
export class UnsupportedMediaTypeError extends AppError {
  constructor(message: string) {
    super(415, 'unsupported_media_type', message);
  }
}

/** 416: the Range asked for lies beyond an object of `size` bytes (answers `Content-Range: bytes *\/size`). */
export class RangeNotSatisfiableError extends AppError {
  constructor(size: number) {
    super(416, 'range_not_satisfiable', `the object has ${size} bytes`);
    this.headers['content-range'] = `bytes */${size}`;
  }
}

export class PayloadTooLargeError extends AppError {
  constructor(message: string) {
    super(413, 'payload_too_large', message);
  }
}

/**
 * 429: a per-workspace limit (schedules, queued runs), throttled logins, a full hashing queue.
 * With `retryAfterSeconds` the answer carries `Retry-After` (whole seconds, at least 1).
 */
export class TooManyRequestsError extends AppError {
  readonly retryAfterSeconds: number | undefined;
  constructor(message: string, retryAfterSeconds?: number) {
    super(429, 'too_many_requests', message);
    this.retryAfterSeconds = retryAfterSeconds === undefined ? undefined : Math.max(1, Math.ceil(retryAfterSeconds));
    if (this.retryAfterSeconds !== undefined) this.headers['retry-after'] = String(this.retryAfterSeconds);
  }
}

export class ServiceUnavailableError extends AppError {
  constructor(code: string, message: string) {
    super(503, code, message);
  }
}

/** A write would take the workspace beyond WORKSPACE_QUOTA_BYTES: 507, nothing written. */
export class QuotaExceededError extends AppError {
  constructor(message: string) {
    super(507, 'quota_exceeded', message);
  }
}

/**
 * The codes of a full disk: the file system's (ENOSPC; EDQUOT, a user's quota of it) and
 * PostgreSQL's (53100 `disk_full`). The service-kit answers them 507 `insufficient_storage`:
 * the server's fault, not the request's, and nothing was stored.
 */
const OUT_OF_SPACE = new Set(['ENOSPC', 'EDQUOT', '53100']);

/** Whether `err` says the disk under the platform's storage or database is full. */
export function isOutOfSpace(err: unknown): boolean {
  return typeof err === 'object' && err !== null && OUT_OF_SPACE.has(String((err as { code?: unknown }).code));
}

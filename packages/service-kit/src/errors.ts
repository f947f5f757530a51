/**
 * One error type per failure kind; `plugin.ts` maps them to HTTP in one place.
 * `code` is the `error` field of SPEC §3 bodies; `message` is for people.
 */
export class AppError extends Error {
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

export class BadRequestError extends AppError {
  constructor(message: string, fields?: Record<string, string>) {
    super(400, 'invalid_request', message, fields ? { fields } : {});
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
  constructor(message = 'not found') {
    super(404, 'not_found', message);
  }
}

export class ConflictError extends AppError {
  constructor(message: string, code = 'conflict') {
    super(409, code, message);
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

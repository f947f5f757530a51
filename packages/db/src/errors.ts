/** PostgreSQL error helpers shared by every service (SQLSTATE codes, not message text). */

function sqlState(err: unknown): string | undefined {
  if (typeof err === 'object' && err !== null && 'code' in err) {
    const code = err.code;
    return typeof code === 'string' ? code : undefined;
  }
  return undefined;
}

export function isUniqueViolation(err: unknown): boolean {
  return sqlState(err) === '23505';
}

export function isForeignKeyViolation(err: unknown): boolean {
  return sqlState(err) === '23503';
}

/** serialization_failure or deadlock_detected: the transaction can be retried as a whole. */
export function isSerializationFailure(err: unknown): boolean {
  const code = sqlState(err);
  return code === '40001' || code === '40P01';
}

/** Runs `work` again (up to `attempts` times) when it fails with a retryable transaction conflict. */
export async function withRetry<T>(work: () => Promise<T>, attempts = 5): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await work();
    } catch (err) {
      if (!isSerializationFailure(err) || attempt >= attempts) throw err;
      await new Promise((r) => setTimeout(r, Math.random() * 10 * attempt));
    }
  }
}

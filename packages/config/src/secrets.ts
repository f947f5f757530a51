import { randomBytes } from 'node:crypto';
import { chmodSync, linkSync, mkdirSync, readFileSync, renameSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** File in DATA_DIR that keeps the secrets generated in development mode. */
export const SECRETS_FILE = 'secrets.json';

export interface GeneratedSecrets {
  JWT_SECRET: string;
  INTERNAL_SERVICE_TOKEN: string;
  ADMIN_TOKENS: string;
  SECRETS_KEY: string;
  AGENT_TOKEN: string;
  BOOTSTRAP_ADMIN_PASSWORD: string;
  /** The embedded PostgreSQL: the platform role's password, and the cluster superuser's. */
  EMBEDDED_DB_PASSWORD: string;
  EMBEDDED_DB_SUPERUSER_PASSWORD: string;
}

function token(bytes = 32): string {
  return randomBytes(bytes).toString('base64url');
}

function generate(): GeneratedSecrets {
  return {
    JWT_SECRET: token(48),
    INTERNAL_SERVICE_TOKEN: token(),
    ADMIN_TOKENS: token(),
    SECRETS_KEY: randomBytes(32).toString('base64'),
    AGENT_TOKEN: token(),
    // Readable enough to type once, still ~96 bits of entropy.
    BOOTSTRAP_ADMIN_PASSWORD: token(12),
    EMBEDDED_DB_PASSWORD: token(),
    EMBEDDED_DB_SUPERUSER_PASSWORD: token(),
  };
}

/**
 * Reads the development secrets from DATA_DIR, creating them on first use.
 * The file is written once (mode 0600) and reused by every later start and
 * by every component of the same data directory, so they agree on tokens.
 * Keys missing from an older file are added without touching existing ones.
 */
export function loadOrCreateSecrets(dataDir: string): GeneratedSecrets {
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const file = join(dataDir, SECRETS_FILE);
  let existing: Partial<GeneratedSecrets> | null = null;
  try {
    existing = JSON.parse(readFileSync(file, 'utf8')) as Partial<GeneratedSecrets>;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') {
      throw new Error(`cannot read ${file}: ${(err as Error).message}; fix or delete the file`, { cause: err });
    }
  }
  const fresh = generate();
  const merged: GeneratedSecrets = { ...fresh, ...(existing ?? {}) };
  const complete = existing !== null && (Object.keys(fresh) as (keyof GeneratedSecrets)[]).every((k) => typeof existing?.[k] === 'string');
  if (complete) return merged;
  // Write a temporary file first, so that no reader ever sees half a file.
  const tmp = `${file}.${process.pid}.${Date.now()}.tmp`;
  writeFileSync(tmp, JSON.stringify(merged, null, 2) + '\n', { mode: 0o600 });
  chmodSync(tmp, 0o600);
  if (existing === null) {
    // First creation: link() fails if another process created the file meanwhile,
    // and then that process's secrets are the ones everybody uses.
    try {
      linkSync(tmp, file);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    unlinkSync(tmp);
  } else {
    renameSync(tmp, file);
  }
  return JSON.parse(readFileSync(file, 'utf8')) as GeneratedSecrets;
}

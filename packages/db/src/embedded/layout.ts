import { join } from 'node:path';

/** Fixed names of the embedded cluster: the platform's role and database, the socket's port number. */
export const EMBEDDED = {
  user: 'codeagent',
  database: 'codeagent',
  /** Only names the socket file (`.s.PGSQL.5432`): there is no TCP listener. */
  port: 5432,
  majorVersion: '18',
} as const;

export interface EmbeddedPaths {
  /** The PostgreSQL cluster (mode 0700). */
  pgdata: string;
  /** The server's Unix socket directory (mode 0700): the only way in. */
  socketDir: string;
  /** Where the earlier embedded engine (PGlite) kept its data; see `codeagent import-pglite`. */
  legacyPglite: string;
}

export function embeddedPaths(dataDir: string): EmbeddedPaths {
  return { pgdata: join(dataDir, 'postgres'), socketDir: join(dataDir, 'postgres-socket'), legacyPglite: join(dataDir, 'pgdata') };
}

/** How a component reaches the embedded server: the socket directory and the platform role's password. */
export function embeddedConnection(dataDir: string, password: string): { host: string; port: number; user: string; password: string; database: string } {
  return { host: embeddedPaths(dataDir).socketDir, port: EMBEDDED.port, user: EMBEDDED.user, password, database: EMBEDDED.database };
}

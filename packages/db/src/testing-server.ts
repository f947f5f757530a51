import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EmbeddedPostgres } from './embedded/server.js';
import { EMBEDDED } from './embedded/layout.js';
import { EMBEDDED_TEST_SERVER_ENV, type EmbeddedTestServer } from './testing.js';

/**
 * Global setup of the `db:embedded` test project: the embedded PostgreSQL exactly as
 * `codeagent start` runs it (same programs, same socket-only, password-only configuration),
 * in a throw-away DATA_DIR, with room for the test files' parallel pools.
 */
export default async function setup(): Promise<() => Promise<void>> {
  const dataDir = mkdtempSync(join(tmpdir(), 'codeagent-test-pg-'));
  const superuserPassword = randomBytes(18).toString('base64url');
  const password = randomBytes(18).toString('base64url');
  const server = new EmbeddedPostgres({ dataDir, superuserPassword, password, maxConnections: 300, onLog: (l) => console.error(`[embedded postgres] ${l}`) });
  await server.start();
  const info: EmbeddedTestServer = { socketDir: server.paths.socketDir, port: EMBEDDED.port, superuserPassword, user: EMBEDDED.user, password };
  process.env[EMBEDDED_TEST_SERVER_ENV] = JSON.stringify(info);
  return async () => {
    await server.stop();
    rmSync(dataDir, { recursive: true, force: true });
  };
}

import { defineConfig } from 'vitest/config';

/**
 * Three projects: `unit` (no database), and the database tests (`*.db.test.ts`) twice: once
 * on the embedded PostgreSQL exactly as `codeagent start` runs it (started once for the run
 * by the project's global setup), once on the machine's PostgreSQL at TEST_DATABASE_URL.
 * scripts/bootstrap.mjs decides whether the second half runs (and says so when it cannot).
 */
const include = [
  '{packages,services}/*/src/**/*.test.ts',
  'cli/src/**/*.test.ts',
  'bench/**/*.test.ts',
  // The JupyterLab extension: its pure logic, and the browser test (ui-tests) through the gateway.
  'extensions/*/src/**/*.test.ts',
  'extensions/*/ui-tests/**/*.test.ts',
  // The web app: build checks and its browser test through the gateway.
  'web/src/**/*.test.ts',
  'web/test/**/*.test.ts',
];
const dbInclude = ['{packages,services}/*/src/**/*.db.test.ts', 'cli/src/**/*.db.test.ts'];
const withPostgres = process.env.CODEAGENT_TEST_POSTGRES !== '0';

export default defineConfig({
  test: {
    testTimeout: 30_000,
    hookTimeout: 60_000,
    projects: [
      // The few unit tests that need a database (browser and conformance tests) use the embedded server too.
      {
        extends: true,
        test: {
          name: 'unit',
          include,
          exclude: [...dbInclude, '**/node_modules/**', '**/dist/**', 'extensions/*/lib/**'],
          env: { CODEAGENT_TEST_DB: 'embedded' },
          globalSetup: ['packages/db/src/testing-server.ts'],
        },
      },
      {
        extends: true,
        test: { name: 'db:embedded', include: dbInclude, env: { CODEAGENT_TEST_DB: 'embedded' }, globalSetup: ['packages/db/src/testing-server.ts'] },
      },
      ...(withPostgres ? [{ extends: true, test: { name: 'db:postgres', include: dbInclude, env: { CODEAGENT_TEST_DB: 'postgres' } } }] : []),
    ],
  },
});

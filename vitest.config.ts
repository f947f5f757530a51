import { defineConfig } from 'vitest/config';

/**
 * Three projects: `unit` (no database), and the database tests (`*.db.test.ts`) twice,
 * once on embedded PGlite and once on the PostgreSQL server. scripts/bootstrap.mjs
 * decides whether the PostgreSQL half runs (and says so when it cannot).
 */
const include = [
  '{packages,services}/*/src/**/*.test.ts',
  'cli/src/**/*.test.ts',
  'bench/**/*.test.ts',
  // The JupyterLab extension: its pure logic, and the browser test (ui-tests) through the gateway.
  'extensions/*/src/**/*.test.ts',
  'extensions/*/ui-tests/**/*.test.ts',
];
const dbInclude = ['{packages,services}/*/src/**/*.db.test.ts', 'cli/src/**/*.db.test.ts'];
const withPostgres = process.env.CODEAGENT_TEST_POSTGRES !== '0';

export default defineConfig({
  test: {
    testTimeout: 30_000,
    hookTimeout: 60_000,
    projects: [
      { extends: true, test: { name: 'unit', include, exclude: [...dbInclude, '**/node_modules/**', '**/dist/**', 'extensions/*/lib/**'] } },
      { extends: true, test: { name: 'db:pglite', include: dbInclude, env: { CODEAGENT_TEST_DB: 'pglite' } } },
      ...(withPostgres
        ? [{ extends: true, test: { name: 'db:postgres', include: dbInclude, env: { CODEAGENT_TEST_DB: 'postgres' } } }]
        : []),
    ],
  },
});

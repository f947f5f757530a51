import { availableParallelism } from 'node:os';
import { defineConfig, type TestProjectInlineConfiguration } from 'vitest/config';

/**
 * Projects: `unit` (no database), and the database tests (`*.db.test.ts`) twice: once
 * on the embedded PostgreSQL exactly as `codeagent start` runs it (started once for the run
 * by the project's global setup), once on the machine's PostgreSQL at TEST_DATABASE_URL.
 * scripts/bootstrap.mjs decides whether the second half runs (and says so when it cannot).
 *
 * Parallelism (docs/decisions/0170-parallel-tests.md): the test files are independent (each
 * database test file creates its own database, servers listen on port 0, data lives in
 * mkdtemp directories) and mostly wait on I/O (kernels, servers, PostgreSQL), so the first
 * group runs TEST_WORKERS files at once (default: cores + 1). The files in `serialUnit` and
 * `serialDb` measure time or load the machine (browsers, floods, CPU-bound work with deadlines):
 * they run afterwards in a second group, one at a time, in each project's `…:serial` twin
 * (each twin with a global setup starts its own embedded server: socket-only, no port clash).
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
/**
 * Run on the embedded server only (decision 0197): the browser tests drive pages through the
 * whole stack; the sandbox's hostile corpus and hung mount attack kernels and mounts; the mount
 * tests drive rclone against the WebDAV tree; the lab's websockets behind both ingresses start
 * sandboxed servers. None asks anything of the database that the API
 * tests do not ask on both servers. (The hostile corpus and the hung mount also say so
 * themselves, for a run of the PostgreSQL half alone.)
 */
const embeddedOnly = [
  '**/*.browser.db.test.ts',
  'services/worker/src/hostile.db.test.ts',
  'services/worker/src/mount-hang.db.test.ts',
  'services/worker/src/mount-run.db.test.ts',
  'services/backend/src/routes/dav-rclone.db.test.ts',
  'services/backend/src/jupyter-lab-sockets.db.test.ts',
];

/**
 * Files that must not share the machine with other test files (each says why). They run after
 * the parallel group, one at a time. Measured: with them in the parallel group, on a loaded
 * machine, their tests ran into the 30 s test and 60 s hook timeouts.
 */
const serialUnit = [
  // Headless Chromium (plus a gateway, backend and kernels): two at once overload 2 cores.
  '**/*.e2e.test.ts',
  // scrypt on threads at nice 10 (real hashes, bounded queue): starved by any other CPU load.
  'packages/auth/src/auth.test.ts',
  // Nine platform processes (gateway, 2 backends, 2 workers, runtime, …), one SIGKILLed mid-run.
  'cli/src/scale-out.test.ts',
  // `codeagent start` whole (initdb of the embedded PostgreSQL, every component) within 30 s, twice.
  'cli/src/start.test.ts',
  // The bridge against a real opencode server and its fake model: CPU-heavy start, fixed deadlines.
  'services/bridge/src/opencode.contract.test.ts',
];
const serialDb = [
  // Headless Chromium, as above.
  '**/*.browser.db.test.ts',
  // Timing assertions: a login flood's health latency; login timing of unknown vs known e-mail.
  'services/backend/src/routes/login-flood.db.test.ts',
  'services/backend/src/routes/auth.db.test.ts',
  // Real scrypt logins in bulk (throttling, lock-out, password changes): see auth.test.ts above.
  'services/backend/src/routes/accounts.db.test.ts',
  // 50 parallel transactions per round against one database, five rounds.
  'services/backend/src/domain/workspaces.concurrency.db.test.ts',
  // A workspace mount that stops answering (SIGSTOPped rclone) mid-run: bounds of 20 s + 60 s grace, measured.
  'services/worker/src/mount-hang.db.test.ts',
  // The hostile corpus twice (unmounted, mounted): fork bombs, memory hogs and disk fills against
  // the sandbox limits, kernel starts with 60 s deadlines. On a loaded machine (other test files
  // beside it) the mounted half once lost kernels to a fork bomb's leftovers (decision 0141).
  'services/worker/src/hostile.db.test.ts',
];

/** Files run at once in the parallel group: one more than the cores (the tests mostly wait), at least 2. */
const workers = Number(process.env.TEST_WORKERS) || Math.max(2, availableParallelism() + 1);

const notBuilt = ['**/node_modules/**', '**/dist/**', 'extensions/*/lib/**'];

/** A project and its `:serial` twin, which runs its `serial` files one at a time after the parallel group. */
function split(
  name: string,
  files: string[],
  serial: string[],
  exclude: string[],
  rest: TestProjectInlineConfiguration['test'],
): TestProjectInlineConfiguration[] {
  return [
    { extends: true, test: { ...rest, name, include: files, exclude: [...exclude, ...serial], maxWorkers: workers } },
    { extends: true, test: { ...rest, name: `${name}:serial`, include: serial, exclude, maxWorkers: 1, sequence: { groupOrder: 1 } } },
  ];
}

export default defineConfig({
  test: {
    testTimeout: 30_000,
    hookTimeout: 60_000,
    projects: [
      // The few unit tests that need a database (browser and conformance tests) use the embedded server too.
      ...split('unit', include, serialUnit, [...dbInclude, ...notBuilt], {
        env: { CODEAGENT_TEST_DB: 'embedded' },
        globalSetup: ['packages/db/src/testing-server.ts'],
      }),
      ...split('db:embedded', dbInclude, serialDb, notBuilt, { env: { CODEAGENT_TEST_DB: 'embedded' }, globalSetup: ['packages/db/src/testing-server.ts'] }),
      ...(withPostgres ? split('db:postgres', dbInclude, serialDb, [...notBuilt, ...embeddedOnly], { env: { CODEAGENT_TEST_DB: 'postgres' } }) : []),
    ],
  },
});

import { fork, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { loadConfig, SECRETS_FILE, type Config } from '@codeagent/config';
import { EmbeddedPostgres, embeddedMaxConnections, embeddedPaths, migratePlatform } from '@codeagent/db/start';
import { components, READY_MESSAGE, SUPERVISED_ENV, type ComponentName } from './components.js';
import { acquireDataDirLock, checkPortsFree, StartError } from './preflight.js';
import { settleOnceAfterStart } from './settle.js';

const CLI = fileURLToPath(new URL('./index.js', import.meta.url));
const STOP_GRACE_MS = 15_000;
const READY_TIMEOUT_MS = 90_000;
const MAX_RESTARTS_PER_MINUTE = 5;

/**
 * V8 settings of the components the supervisor starts: young-generation semi-spaces of 1 MiB
 * instead of up to 16 MiB. Idle, each component then holds 10–30 MB less (the semi-spaces grow
 * during start-up and stay grown); busy, throughput stayed within the noise (bench/young-gen,
 * docs/decisions/0085). A --max-semi-space-size of the operator's (NODE_OPTIONS, the command
 * line) is kept as given.
 */
export function componentExecArgv(execArgv: readonly string[] = process.execArgv, nodeOptions = process.env.NODE_OPTIONS ?? ''): string[] {
  const given = [...execArgv, ...nodeOptions.split(/\s+/)].some((a) => /^--max[-_]semi[-_]space[-_]size\b/.test(a));
  return given ? [...execArgv] : [...execArgv, '--max-semi-space-size=1'];
}

function signalGroup(group: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-group, signal);
  } catch {
    // the group is gone
  }
}

function groupAlive(group: number): boolean {
  try {
    process.kill(-group, 0);
    return true;
  } catch {
    return false;
  }
}

interface Supervised {
  name: ComponentName;
  child: ChildProcess | undefined;
  restarts: number[];
}

const say = (line: string) => console.error(`codeagent: ${line}`);

/** Restart times within the last minute, with `now` added; more than the limit means "keeps failing". */
function recordRestart(restarts: number[], now = Date.now()): number[] {
  return [...restarts.filter((t) => now - t < 60_000), now];
}

const backoff = (attempt: number) => Math.min(30_000, 500 * 2 ** (attempt - 1));

/**
 * `codeagent start`: the whole platform on this machine. Order: the data directory's lock, a
 * check that the ports are free, the embedded PostgreSQL (unless DATABASE_URL), the migrations
 * (once, before any service), the components (each reports ready over IPC), the gateway last.
 * A start either succeeds for real or stops everything it started and says why in one line.
 * Running: a component or PostgreSQL that dies is restarted with back-off; one that keeps
 * dying stops the platform. SIGTERM/SIGINT stop the components gracefully, PostgreSQL last.
 * Components notice a supervisor that died (their IPC channel closes) and stop themselves;
 * PostgreSQL is tied to the supervisor by PR_SET_PDEATHSIG.
 */
export async function superviseAll(): Promise<number> {
  process.env.STORAGE_BACKEND ||= 'local';
  const config = loadConfig();
  const releaseLock = acquireDataDirLock(config.dataDir);

  const supervised: Supervised[] = (Object.keys(components) as ComponentName[])
    // With BACKEND_IN_GATEWAY the backend runs in the gateway's process (decision 0194).
    .filter((n) => components[n].inStart && !(n === 'backend' && config.backendInGateway))
    .map((name) => ({ name, child: undefined, restarts: [] }));
  let db: EmbeddedPostgres | undefined;
  /** A start of PostgreSQL in progress: stopping waits for it, so no server is left behind. */
  let dbStarting: Promise<void> = Promise.resolve();
  let dbRestarts: number[] = [];
  let stopping = false;
  let exitCode = 0;
  let resolveDone!: (code: number) => void;
  const done = new Promise<number>((r) => (resolveDone = r));

  const stopChild = async (child: ChildProcess) => {
    const group = child.pid;
    if (group === undefined) return;
    if (child.exitCode === null && child.signalCode === null) {
      // The whole process group: a component's own children (the runtime's Jupyter server) too.
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      signalGroup(group, 'SIGTERM');
      const timer = setTimeout(() => signalGroup(group, 'SIGKILL'), STOP_GRACE_MS);
      await exited;
      clearTimeout(timer);
    }
    // Whatever of the group outlived the component gets a moment, then SIGKILL.
    const deadline = Date.now() + 5000;
    while (groupAlive(group) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    signalGroup(group, 'SIGKILL');
  };

  const stop = async (code: number) => {
    if (stopping) return done;
    stopping = true;
    exitCode = code;
    await Promise.all(
      supervised
        .map((s) => s.child)
        .filter((c): c is ChildProcess => c !== undefined)
        .map(stopChild),
    );
    await dbStarting.catch(() => undefined);
    await db?.stop().catch((err: unknown) => say(`stopping PostgreSQL failed: ${(err as Error).message}`));
    releaseLock();
    resolveDone(exitCode);
    return done;
  };
  process.once('SIGTERM', () => void stop(0));
  process.once('SIGINT', () => void stop(0));

  const childEnv: NodeJS.ProcessEnv = { ...process.env, DATA_DIR: config.dataDir, [SUPERVISED_ENV]: '1' };

  /** Starts one component; resolves when it reports ready, rejects when it exits first. */
  const launch = (s: Supervised): Promise<void> => {
    // Each component leads its own process group, so that stopping it reaches its children too.
    const child = fork(CLI, [s.name], { env: childEnv, execArgv: componentExecArgv(), stdio: ['ignore', 'inherit', 'inherit', 'ipc'], detached: true });
    s.child = child;
    let ready = false;
    const readiness = new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new StartError(`${s.name} did not become ready within ${READY_TIMEOUT_MS / 1000} s`)), READY_TIMEOUT_MS);
      child.on('message', (m) => {
        if (m === READY_MESSAGE && !ready) {
          ready = true;
          clearTimeout(timer);
          resolve();
        }
      });
      child.once('exit', (code, signal) => {
        clearTimeout(timer);
        if (!ready) reject(new StartError(`${s.name} could not start (exit ${code ?? signal}; its message is above)`));
      });
    });
    child.once('exit', (code, signal) => {
      if (s.child === child) s.child = undefined;
      if (stopping || !ready) return;
      s.restarts = recordRestart(s.restarts);
      if (code === 78 || s.restarts.length > MAX_RESTARTS_PER_MINUTE) {
        say(`${s.name} keeps failing (exit ${code ?? signal}); stopping the platform`);
        void stop(1);
        return;
      }
      const delay = backoff(s.restarts.length);
      say(`${s.name} exited (${code ?? signal}); restarting it in ${delay} ms`);
      setTimeout(() => {
        if (!stopping) launch(s).catch((err: unknown) => say((err as Error).message));
      }, delay).unref();
    });
    return readiness;
  };

  const restartDatabase = (code: number | null, signal: NodeJS.Signals | null) => {
    if (stopping || !db) return;
    dbRestarts = recordRestart(dbRestarts);
    if (dbRestarts.length > MAX_RESTARTS_PER_MINUTE) {
      say(`the embedded PostgreSQL keeps failing (exit ${code ?? signal}); stopping the platform`);
      void stop(1);
      return;
    }
    const delay = backoff(dbRestarts.length);
    say(
      `the embedded PostgreSQL stopped unexpectedly (${code ?? signal}); restarting it in ${delay} ms (committed data is safe: it recovers from its write-ahead log)`,
    );
    const retry = () => {
      if (stopping) return;
      dbStarting = db!.start();
      dbStarting.then(
        () => say('the embedded PostgreSQL is back; the components reconnect on their own'),
        (err: unknown) => {
          dbRestarts = recordRestart(dbRestarts);
          if (dbRestarts.length > MAX_RESTARTS_PER_MINUTE) {
            say(`the embedded PostgreSQL cannot be restarted (${(err as Error).message}); stopping the platform`);
            void stop(1);
          } else setTimeout(retry, backoff(dbRestarts.length)).unref();
        },
      );
    };
    setTimeout(retry, delay).unref();
  };

  try {
    await checkPortsFree(config);
    if (!config.databaseUrl) {
      const legacy = embeddedPaths(config.dataDir).legacyPglite;
      if (existsSync(legacy) && !existsSync(embeddedPaths(config.dataDir).pgdata)) {
        throw new StartError(
          `${legacy} holds the data of the earlier embedded database (PGlite), which this version replaced by PostgreSQL; ` +
            'copy it over with `npm run codeagent -- import-pglite` and start again (or move that directory away to start empty)',
        );
      }
      db = new EmbeddedPostgres({
        dataDir: config.dataDir,
        password: config.embeddedDatabase!.password,
        superuserPassword: config.embeddedDatabase!.superuserPassword,
        maxConnections: embeddedMaxConnections(),
        onLog: (line) => console.error(`postgres: ${line}`),
        onUnexpectedExit: restartDatabase,
      });
      dbStarting = db.start();
      await dbStarting;
    }
    // Migrations once, before any component touches the database.
    await migratePlatform(config);
    if (stopping) return done;
    // The gateway comes last, once every component serves, so that nobody meets a 502 at start.
    await Promise.all(supervised.filter((s) => s.name !== 'gateway').map(launch));
    if (stopping) return done;
    await Promise.all(supervised.filter((s) => s.name === 'gateway').map(launch));
  } catch (err) {
    if (!stopping) {
      say(`${(err as Error).message}`);
      if (!(err instanceof StartError) && process.env.LOG_LEVEL === 'debug') console.error(err);
      say('the platform did not start; everything it had started is stopped');
    }
    return stop(1);
  }

  const url = `http://${config.host === '0.0.0.0' ? '127.0.0.1' : config.host}:${config.port}`;
  const health = await fetch(`${url}/api/v1/health`, { signal: AbortSignal.timeout(10_000) })
    .then(async (res) => (await res.json()) as HealthBody)
    .catch(() => undefined);
  if (!stopping) printBanner(url, config, health);
  // What the start left behind (migrations, the start-up allocations) is given back once.
  if (!stopping) settleOnceAfterStart();
  return done;
}

interface HealthBody {
  status: string;
  checks: Record<string, string>;
}

function printBanner(url: string, config: Config, health: HealthBody | undefined): void {
  const password = config.bootstrapAdminPasswordGenerated
    ? `${config.bootstrapAdminPassword}   (generated at the first start, kept in ${config.dataDir}/${SECRETS_FILE}; once changed on the account page, yours replaces it)`
    : '(the value of BOOTSTRAP_ADMIN_PASSWORD)';
  const checks = health
    ? `${health.status}  (${Object.entries(health.checks)
        .map(([k, v]) => `${k} ${v}`)
        .join(', ')})`
    : 'not answering yet';
  console.log(
    [
      '',
      `  codeagent is running at ${url}`,
      '',
      `  administrator:  ${config.bootstrapAdminEmail}`,
      `  password:       ${password}`,
      '',
      `  database:       ${config.databaseUrl ? 'PostgreSQL (DATABASE_URL)' : `embedded PostgreSQL, in ${embeddedPaths(config.dataDir).pgdata} (Unix socket only)`}`,
      `  storage:        ${config.storageBackend}${config.storageBackend === 'local' ? `, in ${config.localStorageBaseDir}` : ''}`,
      `  health:         ${checks}`,
      '',
      '  Stop with Ctrl-C.',
      '',
    ].join('\n'),
  );
}

import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { loadConfig, SECRETS_FILE, type Config } from '@codeagent/config';
import { startEmbeddedDatabaseServer, type EmbeddedDatabaseServer } from '@codeagent/db';
import { components, type ComponentName } from './components.js';

const CLI = fileURLToPath(new URL('./index.js', import.meta.url));
const STOP_GRACE_MS = 15_000;
const MAX_RESTARTS_PER_MINUTE = 5;

interface Supervised {
  name: ComponentName;
  child: ChildProcess | undefined;
  restarts: number[];
}

/**
 * `codeagent start`: every component as a child process of this one, on embedded defaults.
 * Without DATABASE_URL this process serves the embedded database to the children. A child
 * that dies is restarted with back-off; one that keeps dying stops the platform. SIGTERM or
 * SIGINT stops the children gracefully (SIGTERM, then SIGKILL after 15 s) and exits 0.
 */
export async function superviseAll(): Promise<number> {
  process.env.STORAGE_BACKEND ||= 'local';
  const config = loadConfig();
  const childEnv: NodeJS.ProcessEnv = { ...process.env, DATA_DIR: config.dataDir };

  let db: EmbeddedDatabaseServer | undefined;
  if (!config.databaseUrl) {
    db = await startEmbeddedDatabaseServer(config.dataDir);
    childEnv.DATABASE_URL = db.url;
  }

  const names = (Object.keys(components) as ComponentName[]).filter((n) => components[n].inStart);
  const supervised: Supervised[] = names.map((name) => ({ name, child: undefined, restarts: [] }));
  let stopping = false;
  let exitCode = 0;

  const launch = (s: Supervised) => {
    const child = spawn(process.execPath, [CLI, s.name], { env: childEnv, stdio: ['ignore', 'inherit', 'inherit'] });
    s.child = child;
    child.on('exit', (code, signal) => {
      s.child = undefined;
      if (stopping) return;
      const now = Date.now();
      s.restarts = [...s.restarts.filter((t) => now - t < 60_000), now];
      if (code === 78 || s.restarts.length > MAX_RESTARTS_PER_MINUTE) {
        console.error(`codeagent: ${s.name} keeps failing (exit ${code ?? signal}); stopping the platform`);
        exitCode = 1;
        void stop();
        return;
      }
      const delay = Math.min(30_000, 500 * 2 ** (s.restarts.length - 1));
      console.error(`codeagent: ${s.name} exited (${code ?? signal}); restarting in ${delay} ms`);
      setTimeout(() => !stopping && launch(s), delay).unref();
    });
  };

  let resolveDone!: (code: number) => void;
  const done = new Promise<number>((r) => (resolveDone = r));

  const stop = async () => {
    if (stopping) return;
    stopping = true;
    const running = supervised.map((s) => s.child).filter((c): c is ChildProcess => c !== undefined && c.exitCode === null);
    await Promise.all(
      running.map(
        (child) =>
          new Promise<void>((resolve) => {
            const timer = setTimeout(() => child.kill('SIGKILL'), STOP_GRACE_MS);
            child.once('exit', () => {
              clearTimeout(timer);
              resolve();
            });
            child.kill('SIGTERM');
          }),
      ),
    );
    await db?.stop();
    resolveDone(exitCode);
  };
  process.once('SIGTERM', () => void stop());
  process.once('SIGINT', () => void stop());

  // The gateway comes last, once the backend answers, so that nobody meets a 502 at start.
  supervised.filter((s) => s.name !== 'gateway').forEach(launch);
  await waitAnswering(`${config.backendUrl}/api/v1/health`, () => stopping);
  supervised.filter((s) => s.name === 'gateway').forEach(launch);
  const url = `http://${config.host === '0.0.0.0' ? '127.0.0.1' : config.host}:${config.port}`;
  const health = await waitAnswering(`${url}/api/v1/health`, () => stopping);
  if (health) printBanner(url, config, health);
  return done;
}

interface HealthBody {
  status: string;
  checks: Record<string, string>;
}

/** Polls a health URL until the backend behind it answers (healthy or not); undefined on give-up. */
async function waitAnswering(url: string, givenUp: () => boolean, timeoutMs = 90_000): Promise<HealthBody | undefined> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline && !givenUp()) {
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(5000) });
      if (res.status === 200 || res.status === 503) return (await res.json()) as HealthBody;
      await res.body?.cancel();
    } catch {
      // not up yet
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  if (!givenUp()) console.error(`codeagent: nothing answered at ${url} within ${timeoutMs / 1000} s; see the logs above`);
  return undefined;
}

function printBanner(url: string, config: Config, health: HealthBody): void {
  const password = config.bootstrapAdminPasswordGenerated
    ? `${config.bootstrapAdminPassword}   (generated, kept in ${config.dataDir}/${SECRETS_FILE})`
    : '(the value of BOOTSTRAP_ADMIN_PASSWORD)';
  console.log(
    [
      '',
      `  codeagent is running at ${url}`,
      '',
      `  administrator:  ${config.bootstrapAdminEmail}`,
      `  password:       ${password}`,
      '',
      `  database:       ${config.databaseUrl ? 'PostgreSQL (DATABASE_URL)' : `embedded, in ${config.dataDir}/pgdata`}`,
      `  storage:        ${config.storageBackend}${config.storageBackend === 'local' ? `, in ${config.localStorageBaseDir}` : ''}`,
      `  health:         ${health.status}  (${Object.entries(health.checks)
        .map(([k, v]) => `${k} ${v}`)
        .join(', ')})`,
      '',
      '  Stop with Ctrl-C.',
      '',
    ].join('\n'),
  );
}

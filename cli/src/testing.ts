import { spawn, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort } from '@codeagent/service-kit/http';

/** Test helpers: the platform started exactly as `npm start` starts it (`codeagent start`). */

export const CLI = fileURLToPath(new URL('../dist/index.js', import.meta.url));

/** A free port for a component a test starts (decision 0196: below the kernel's ephemeral range). */
export { freePort };

export interface Platform {
  child: ChildProcess;
  url: string;
  ports: Record<string, number>;
  output: () => string;
  exited: Promise<number | null>;
}

const PLATFORM_PORTS = ['PORT', 'BACKEND_PORT', 'RUNTIME_PORT', 'CLUSTER_ADMIN_PORT', 'BRIDGE_PORT'];

/** Every port of the platform, free and distinct, so that tests never meet another platform. */
export async function platformPorts(): Promise<Record<string, number>> {
  const ports: Record<string, number> = {};
  for (const n of PLATFORM_PORTS) ports[n] = await freePort();
  return ports;
}

/**
 * Spawns `codeagent start`; with `waitUntilRunning` resolves once it printed its banner. A start
 * that failed only because a port this helper picked was taken before the component listened on
 * it is tried again with other ports (at most three starts): `freePort`'s port is free when it is
 * picked and outside the range outgoing connections take theirs from (decision 0196), but
 * another test file may pick the same one before the component binds it, seconds later.
 */
export async function startPlatform(dataDir: string, env: NodeJS.ProcessEnv = {}, waitUntilRunning = true): Promise<Platform> {
  const picked = PLATFORM_PORTS.every((name) => env[name] === undefined);
  for (let attempt = 1; ; attempt++) {
    const [platform, closed] = await spawnPlatform(dataDir, env);
    if (!waitUntilRunning || (await running(platform))) return platform;
    let portTaken = false;
    if (platform.child.exitCode !== null) {
      // (Its last words may still be in the pipe when it has exited; a component left holding
      // the pipe does not hold the test beyond a few seconds.)
      await Promise.race([closed, new Promise((r) => setTimeout(r, 5000))]);
      portTaken = /EADDRINUSE|is already in use/.test(platform.output());
    }
    if (!(picked && portTaken && attempt < 3)) throw new Error(`platform did not start:\n${platform.output()}`);
  }
}

/** Whether the platform printed its banner (false once it exited, or after two minutes). */
async function running(platform: Platform): Promise<boolean> {
  const deadline = Date.now() + 120_000;
  while (!platform.output().includes('codeagent is running at')) {
    if (Date.now() > deadline || platform.child.exitCode !== null) return false;
    await new Promise((r) => setTimeout(r, 100));
  }
  return true;
}

/** The platform, and a promise of its output's end. */
async function spawnPlatform(dataDir: string, env: NodeJS.ProcessEnv): Promise<[Platform, Promise<void>]> {
  const ports = await platformPorts();
  const child = spawn(process.execPath, [CLI, 'start'], {
    env: {
      ...process.env,
      DATA_DIR: dataDir,
      LOG_LEVEL: 'warn',
      STORAGE_BACKEND: '',
      DATABASE_URL: '',
      ...Object.fromEntries(Object.entries(ports).map(([k, v]) => [k, String(v)])),
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout?.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr?.on('data', (c: Buffer) => (out += c.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const closed = new Promise<void>((resolve) => child.once('close', () => resolve()));
  return [{ child, url: `http://127.0.0.1:${env.PORT ?? ports.PORT}`, ports, output: () => out, exited }, closed];
}

/** Pids of the processes whose environment names this DATA_DIR (the supervisor's components). */
export function componentsOf(dataDir: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    try {
      const env = readFileSync(join('/proc', entry, 'environ'), 'utf8').split('\0');
      if (env.includes(`DATA_DIR=${dataDir}`)) pids.push(Number(entry));
    } catch {
      // gone, or not ours to read
    }
  }
  return pids;
}

/** The embedded PostgreSQL's postmaster of this DATA_DIR while it runs. */
export function postmasterOf(dataDir: string): number | undefined {
  try {
    const pid = Number(readFileSync(join(dataDir, 'postgres', 'postmaster.pid'), 'utf8').split('\n')[0]);
    process.kill(pid, 0);
    return pid;
  } catch {
    return undefined;
  }
}

export async function waitFor<T>(probe: () => T | Promise<T>, what: string, timeoutMs = 30_000): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

export async function login(url: string, email: string, password: string): Promise<string> {
  const res = await fetch(`${url}/api/v1/auth/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ email, password }),
  });
  if (res.status !== 200) throw new Error(`login of ${email} failed: ${res.status} ${await res.text()}`);
  return ((await res.json()) as { access_token: string }).access_token;
}

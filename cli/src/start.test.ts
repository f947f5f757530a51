import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

const CLI = fileURLToPath(new URL('../dist/index.js', import.meta.url));

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

interface Platform {
  child: ChildProcess;
  url: string;
  output: () => string;
  exited: Promise<number | null>;
}

async function startPlatform(dataDir: string, env: NodeJS.ProcessEnv = {}): Promise<Platform> {
  const [port, backendPort] = await Promise.all([freePort(), freePort()]);
  const child = spawn(process.execPath, [CLI, 'start'], {
    env: { ...process.env, DATA_DIR: dataDir, PORT: String(port), BACKEND_PORT: String(backendPort), LOG_LEVEL: 'warn', STORAGE_BACKEND: '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout?.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr?.on('data', (c: Buffer) => (out += c.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const deadline = Date.now() + 60_000;
  while (!out.includes('codeagent is running at')) {
    if (Date.now() > deadline || child.exitCode !== null) throw new Error(`platform did not start:\n${out}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  return { child, url: `http://127.0.0.1:${port}`, output: () => out, exited };
}

describe('codeagent start (the whole platform on embedded defaults)', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'codeagent-start-'));
  let platform: Platform | undefined;
  afterAll(() => {
    platform?.child.kill('SIGKILL');
  });

  it('starts, prints URL and credentials, and serves SPEC §4.1–4.2 through the gateway', async () => {
    platform = await startPlatform(dataDir);
    const { url } = platform;
    const secrets = JSON.parse(readFileSync(join(dataDir, 'secrets.json'), 'utf8')) as { BOOTSTRAP_ADMIN_PASSWORD: string };
    expect(platform.output()).toContain(`codeagent is running at ${url}`);
    expect(platform.output()).toContain('admin@localhost');
    expect(platform.output()).toContain(secrets.BOOTSTRAP_ADMIN_PASSWORD);
    expect(platform.output()).toMatch(/storage:\s+local/);

    const health = await fetch(`${url}/api/v1/health`);
    expect(health.status).toBe(200);
    expect(health.headers.get('x-request-id')).toBeTruthy();
    expect(await health.json()).toMatchObject({ status: 'ok', checks: { database: 'ok', storage: 'ok' } });

    const login = await fetch(`${url}/api/v1/auth/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: 'admin@localhost', password: secrets.BOOTSTRAP_ADMIN_PASSWORD }),
    });
    expect(login.status).toBe(200);
    const { access_token: token } = (await login.json()) as { access_token: string };
    const auth = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };

    const ws = await fetch(`${url}/api/v1/platform/workspaces`, { method: 'POST', headers: auth, body: JSON.stringify({ name: 'through the gateway' }) });
    expect(ws.status).toBe(201);
    const me = (await (await fetch(`${url}/api/v1/auth/me`, { headers: auth })).json()) as { workspaces: { name: string }[] };
    expect(me.workspaces.map((w) => w.name)).toContain('through the gateway');

    expect((await fetch(`${url}/internal/v1/objects`, { method: 'POST' })).status).toBe(404);
    expect((await fetch(`${url}/api/v1/openapi.json`)).status).toBe(200);
  });

  it('refuses a second start on the same data directory instead of sharing the embedded database', async () => {
    const child = spawn(process.execPath, [CLI, 'start'], { env: { ...process.env, DATA_DIR: dataDir, PORT: '0', BACKEND_PORT: '0' }, stdio: ['ignore', 'pipe', 'pipe'] });
    let err = '';
    child.stderr.on('data', (c: Buffer) => (err += c.toString()));
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    expect(code).toBe(1);
    expect(err).toMatch(/in use by process \d+.*DATABASE_URL/);
  });

  it('stops gracefully on SIGTERM with exit code 0', async () => {
    platform!.child.kill('SIGTERM');
    expect(await platform!.exited).toBe(0);
  });

  it('starts again on the same data directory with the same secrets and data', async () => {
    platform = await startPlatform(dataDir);
    const secrets = JSON.parse(readFileSync(join(dataDir, 'secrets.json'), 'utf8')) as { BOOTSTRAP_ADMIN_PASSWORD: string };
    const login = await fetch(`${platform.url}/api/v1/auth/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: 'admin@localhost', password: secrets.BOOTSTRAP_ADMIN_PASSWORD }),
    });
    const { access_token: token } = (await login.json()) as { access_token: string };
    const list = (await (await fetch(`${platform.url}/api/v1/platform/workspaces`, { headers: { authorization: `Bearer ${token}` } })).json()) as {
      items: { name: string }[];
    };
    expect(list.items.map((w) => w.name)).toEqual(['through the gateway']);
    platform.child.kill('SIGTERM');
    expect(await platform.exited).toBe(0);
  });

  it('refuses to start with an unknown STORAGE_BACKEND and says how to fix it', async () => {
    const child = spawn(process.execPath, [CLI, 'backend'], { env: { ...process.env, DATA_DIR: dataDir, STORAGE_BACKEND: 'floppy' }, stdio: ['ignore', 'pipe', 'pipe'] });
    let err = '';
    child.stderr.on('data', (c: Buffer) => (err += c.toString()));
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    expect(code).toBe(78);
    expect(err).toMatch(/STORAGE_BACKEND="floppy".*use "s3" or "local"/);
  });
});

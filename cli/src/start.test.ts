import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { CLI, startPlatform, type Platform } from './testing.js';

/** The command lines of the supervisor's components. */
function componentArgv(platform: Platform): string[][] {
  return readdirSync('/proc')
    .filter((e) => /^\d+$/.test(e))
    .flatMap((e) => {
      try {
        const stat = readFileSync(`/proc/${e}/stat`, 'utf8');
        if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) !== platform.child.pid) return [];
        return [readFileSync(`/proc/${e}/cmdline`, 'utf8').split('\0')];
      } catch {
        return [];
      }
    })
    .filter((argv) => argv.some((a) => a.endsWith('index.js')));
}

describe('codeagent start (the whole platform on embedded defaults)', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'codeagent-start-'));
  let platform: Platform | undefined;
  afterAll(() => {
    platform?.child.kill('SIGKILL');
  });

  it('starts, prints URL and credentials, and serves docs/contract/spec.md §4.1–4.2 through the gateway', async () => {
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

    // The components run with the small young generation of decision 0085 (idle memory).
    const components = componentArgv(platform);
    expect(components.map((argv) => argv.at(-2)).sort()).toEqual(['backend', 'bridge', 'cluster-admin', 'gateway', 'runtime', 'worker']);
    for (const argv of components) expect(argv, argv.join(' ')).toContain('--max-semi-space-size=1');

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
    // Uploads as curl sends them through the gateway: `--data-binary` declares a form type, `-T` none.
    const { id: wsId } = (await ws.json()) as { id: string };
    for (const [name, headers] of [
      ['form.csv', { 'content-type': 'application/x-www-form-urlencoded' }],
      ['none.csv', {}],
    ] as const) {
      const put = await fetch(`${url}/api/v1/data-resources/${wsId}/objects/${name}`, {
        method: 'PUT',
        headers: { authorization: `Bearer ${token}`, ...headers },
        body: new TextEncoder().encode('a,b\n1,2\n'),
      });
      expect(put.status, name).toBe(201);
      expect(((await put.json()) as { content_type: string }).content_type, name).toBe('text/csv');
    }
    const me = (await (await fetch(`${url}/api/v1/auth/me`, { headers: auth })).json()) as { workspaces: { name: string }[] };
    expect(me.workspaces.map((w) => w.name)).toContain('through the gateway');

    expect((await fetch(`${url}/internal/v1/objects`, { method: 'POST' })).status).toBe(404);
    const openapi = await fetch(`${url}/api/v1/openapi.json`);
    expect(openapi.status).toBe(200);
    const paths = Object.keys(((await openapi.json()) as { paths: Record<string, unknown> }).paths);
    expect(paths).toContain('/api/v1/auth/login');
    expect(paths.filter((p) => !p.startsWith('/api/v1/'))).toEqual([]);
  });

  it('refuses a second start on the same data directory instead of sharing the embedded database', async () => {
    const child = spawn(process.execPath, [CLI, 'start'], {
      env: { ...process.env, DATA_DIR: dataDir, PORT: '0', BACKEND_PORT: '0' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
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

  it('starts again on the same data directory with the same secrets and data, this time with the backend in the gateway (BACKEND_IN_GATEWAY)', async () => {
    platform = await startPlatform(dataDir, { BACKEND_IN_GATEWAY: 'true' });
    // Five processes: the backend runs in the gateway's (decision 0194), and still serves the other components on its port.
    expect(
      componentArgv(platform)
        .map((argv) => argv.at(-2))
        .sort(),
    ).toEqual(['bridge', 'cluster-admin', 'gateway', 'runtime', 'worker']);
    expect((await fetch(`http://127.0.0.1:${platform.ports.BACKEND_PORT}/api/v1/health`)).status).toBe(200);
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
    const child = spawn(process.execPath, [CLI, 'backend'], {
      env: { ...process.env, DATA_DIR: dataDir, STORAGE_BACKEND: 'floppy' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let err = '';
    child.stderr.on('data', (c: Buffer) => (err += c.toString()));
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    expect(code).toBe(78);
    expect(err).toMatch(/STORAGE_BACKEND="floppy".*use "s3" or "local"/);
  });
});

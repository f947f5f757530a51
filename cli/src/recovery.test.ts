import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { hashPassword } from '@codeagent/auth';
import { listMigrations } from '@codeagent/db';
import { CLI, componentsOf, login, postmasterOf, startPlatform, waitFor, type Platform } from './testing.js';

const adminPassword = (dataDir: string) =>
  (JSON.parse(readFileSync(join(dataDir, 'secrets.json'), 'utf8')) as { BOOTSTRAP_ADMIN_PASSWORD: string }).BOOTSTRAP_ADMIN_PASSWORD;

async function createWorkspace(url: string, token: string, name: string): Promise<number> {
  const res = await fetch(`${url}/api/v1/platform/workspaces`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ name }),
  });
  await res.body?.cancel();
  return res.status;
}

async function workspaceNames(url: string, token: string): Promise<string[] | undefined> {
  const res = await fetch(`${url}/api/v1/platform/workspaces`, { headers: { authorization: `Bearer ${token}` } }).catch(() => undefined);
  if (res?.status !== 200) return undefined;
  return ((await res.json()) as { items: { name: string }[] }).items.map((w) => w.name);
}

describe('codeagent start: faults while running', () => {
  const platforms: Platform[] = [];
  afterAll(() => platforms.forEach((p) => p.child.kill('SIGKILL')));

  it('PostgreSQL killed with SIGKILL: the supervisor restarts it, the components reconnect, nothing committed is lost', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'codeagent-pgkill-'));
    const platform = await startPlatform(dataDir);
    platforms.push(platform);
    const token = await login(platform.url, 'admin@localhost', adminPassword(dataDir));
    expect(await createWorkspace(platform.url, token, 'committed before the kill')).toBe(201);

    const postmaster = postmasterOf(dataDir)!;
    expect(postmaster).toBeGreaterThan(0);
    process.kill(postmaster, 'SIGKILL');
    await waitFor(() => platform.output().includes('the embedded PostgreSQL is back'), 'PostgreSQL to be restarted', 60_000);
    expect(postmasterOf(dataDir)).not.toBe(postmaster);

    // The components' pools drop the dead connections and open new ones.
    const names = await waitFor(() => workspaceNames(platform.url, token), 'the backend to answer again', 30_000);
    expect(names).toContain('committed before the kill');
    expect(await createWorkspace(platform.url, token, 'written after the restart')).toBe(201);
    expect(await workspaceNames(platform.url, token)).toEqual(expect.arrayContaining(['committed before the kill', 'written after the restart']));
    expect(platform.child.exitCode).toBeNull();

    platform.child.kill('SIGTERM');
    expect(await platform.exited).toBe(0);
    expect(postmasterOf(dataDir)).toBeUndefined();
  }, 180_000);

  it('the supervisor killed with SIGKILL: nothing outlives it, and the next start comes up cleanly', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'codeagent-supkill-'));
    const first = await startPlatform(dataDir);
    platforms.push(first);
    const token = await login(first.url, 'admin@localhost', adminPassword(dataDir));
    expect(await createWorkspace(first.url, token, 'survives the supervisor')).toBe(201);
    expect(componentsOf(dataDir).length).toBeGreaterThanOrEqual(7); // supervisor + six components

    first.child.kill('SIGKILL');
    await waitFor(() => componentsOf(dataDir).length === 0, 'every component to stop', 30_000);
    await waitFor(() => postmasterOf(dataDir) === undefined, 'PostgreSQL to stop', 30_000);
    expect(await fetch(`${first.url}/api/v1/health`).catch((e: Error) => e)).toBeInstanceOf(Error);

    const second = await startPlatform(dataDir);
    platforms.push(second);
    const again = await login(second.url, 'admin@localhost', adminPassword(dataDir));
    expect(await workspaceNames(second.url, again)).toContain('survives the supervisor');
    second.child.kill('SIGTERM');
    expect(await second.exited).toBe(0);
  }, 240_000);

  it('`codeagent import-pglite` moves a PGlite DATA_DIR into PostgreSQL; the old users log in afterwards', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'codeagent-import-'));
    // A DATA_DIR as the earlier version left it: PGlite in DATA_DIR/pgdata, migrated, with a user and a workspace.
    const { PGlite } = await import('@electric-sql/pglite');
    const old = await PGlite.create(join(dataDir, 'pgdata'));
    await old.exec('CREATE TABLE schema_migrations (version text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())');
    for (const m of listMigrations().slice(0, 5)) {
      await old.exec(m.sql);
      await old.query('INSERT INTO schema_migrations (version) VALUES ($1)', [m.version]);
    }
    const hash = await hashPassword('old-password-1');
    const user = await old.query<{ id: string }>(
      "INSERT INTO users (email, name, password_hash, platform_role_id) VALUES ('old@example.com', 'Old', $1, 'admin') RETURNING id",
      [hash],
    );
    const ws = await old.query<{ id: string }>("INSERT INTO workspaces (name) VALUES ('from pglite') RETURNING id");
    await old.query("INSERT INTO workspace_members (workspace_id, user_id, role) VALUES ($1, $2, 'admin')", [ws.rows[0]!.id, user.rows[0]!.id]);
    await old.close();

    const res = spawnSync(process.execPath, [CLI, 'import-pglite'], {
      env: { ...process.env, DATA_DIR: dataDir, DATABASE_URL: '' },
      encoding: 'utf8',
      timeout: 120_000,
    });
    expect(res.status, res.stderr).toBe(0);
    expect(res.stdout).toMatch(/users\s+1 rows/);
    expect(res.stdout).toMatch(/workspaces\s+1 rows/);
    expect(existsSync(join(dataDir, 'pgdata'))).toBe(false);
    expect(readdirSync(dataDir).some((f) => f.startsWith('pgdata.imported-'))).toBe(true);

    const platform = await startPlatform(dataDir);
    platforms.push(platform);
    const token = await login(platform.url, 'old@example.com', 'old-password-1');
    const me = (await (await fetch(`${platform.url}/api/v1/auth/me`, { headers: { authorization: `Bearer ${token}` } })).json()) as {
      workspaces: { name: string; role: string }[];
    };
    expect(me.workspaces).toEqual([expect.objectContaining({ name: 'from pglite', role: 'admin' })]);
    platform.child.kill('SIGTERM');
    expect(await platform.exited).toBe(0);
  }, 240_000);
});

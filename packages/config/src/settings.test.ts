import { mkdtempSync, readFileSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from './settings.js';

const tmp = () => mkdtempSync(join(tmpdir(), 'codeagent-config-'));
const PROD_SECRETS = {
  NODE_ENV: 'production',
  JWT_SECRET: 'x'.repeat(40),
  INTERNAL_SERVICE_TOKEN: 'internal',
  ADMIN_TOKENS: 'a, b ,,c',
  SECRETS_KEY: Buffer.alloc(32, 1).toString('base64'),
  AGENT_TOKEN: 'agent',
  BOOTSTRAP_ADMIN_PASSWORD: 'pw-pw-pw-pw',
};

function problemsOf(env: NodeJS.ProcessEnv): string[] {
  try {
    loadConfig({ env, cwd: tmp() });
  } catch (err) {
    if (err instanceof ConfigError) return err.problems;
    throw err;
  }
  return [];
}

describe('settings', () => {
  it('applies the defaults of SPEC §2', () => {
    const dir = tmp();
    const c = loadConfig({ env: {}, cwd: dir });
    expect(c).toMatchObject({
      host: '127.0.0.1',
      port: 8080,
      backendPort: 8091,
      runtimeUrl: 'http://127.0.0.1:8092',
      backendUrl: 'http://127.0.0.1:8091',
      dataDir: join(dir, '.codeagent'),
      databaseUrl: undefined,
      storageBackend: 's3',
      localStorageBaseDir: join(dir, '.codeagent', 'storage'),
      jwtTtlSeconds: 3600,
      bootstrapAdminEmail: 'admin@localhost',
      maxUploadBytes: 10 * 1024 ** 3,
      logLevel: 'info',
      outbound: { allowlist: [], maxRedirects: 5, timeoutMs: 10000, maxResponseBytes: 1048576, allowLoopback: false },
    });
    expect(c.s3.buckets).toEqual({ workspace: 'codeagent-workspace', version: 'codeagent-version', run_log: 'codeagent-run-log', trash: 'codeagent-trash' });
    expect(c.secretsKey).toHaveLength(32);
  });

  it('refuses an unknown STORAGE_BACKEND, naming the variable and the fix', () => {
    const problems = problemsOf({ STORAGE_BACKEND: 'ftp' });
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(/STORAGE_BACKEND="ftp".*use "s3" or "local"/);
  });

  it('reports every bad variable at once', () => {
    const problems = problemsOf({ PORT: 'eighty', JWT_TTL_SECONDS: '-1', LOG_LEVEL: 'loud', DATABASE_URL: 'mysql://x', RUNTIME_URL: 'ftp://x', S3_FORCE_PATH_STYLE: 'maybe' });
    expect(problems.map((p) => p.split(/[=\s]/)[0])).toEqual(
      expect.arrayContaining(['PORT', 'JWT_TTL_SECONDS', 'LOG_LEVEL', 'DATABASE_URL', 'RUNTIME_URL', 'S3_FORCE_PATH_STYLE']),
    );
  });

  it('requires secrets in production mode instead of generating them', () => {
    const problems = problemsOf({ NODE_ENV: 'production' });
    for (const name of ['JWT_SECRET', 'INTERNAL_SERVICE_TOKEN', 'ADMIN_TOKENS', 'SECRETS_KEY', 'AGENT_TOKEN', 'BOOTSTRAP_ADMIN_PASSWORD']) {
      expect(problems.some((p) => p.startsWith(name)), name).toBe(true);
    }
    const c = loadConfig({ env: PROD_SECRETS, cwd: tmp() });
    expect(c.mode).toBe('production');
    expect(c.adminTokens).toEqual(['a', 'b', 'c']);
  });

  it('checks the size of SECRETS_KEY and JWT_SECRET', () => {
    expect(problemsOf({ ...PROD_SECRETS, SECRETS_KEY: Buffer.alloc(16).toString('base64') })[0]).toMatch(/SECRETS_KEY must be 32 bytes/);
    expect(problemsOf({ ...PROD_SECRETS, JWT_SECRET: 'short' })[0]).toMatch(/JWT_SECRET is shorter than 32 bytes/);
  });

  it('generates development secrets once, stores them with mode 0600, and reuses them', () => {
    const dir = tmp();
    const first = loadConfig({ env: { DATA_DIR: 'data' }, cwd: dir });
    const file = join(dir, 'data', 'secrets.json');
    expect(statSync(file).mode & 0o777).toBe(0o600);
    const second = loadConfig({ env: { DATA_DIR: 'data' }, cwd: dir });
    expect(second.jwtSecret).toBe(first.jwtSecret);
    expect(second.internalServiceToken).toBe(first.internalServiceToken);
    expect(second.bootstrapAdminPassword).toBe(first.bootstrapAdminPassword);
    expect(first.bootstrapAdminPasswordGenerated).toBe(true);
    expect(JSON.parse(readFileSync(file, 'utf8')).JWT_SECRET).toBe(first.jwtSecret);
  });

  it('prefers given secrets over generated ones', () => {
    const c = loadConfig({ env: { JWT_SECRET: 'y'.repeat(40), BOOTSTRAP_ADMIN_PASSWORD: 'given-password' }, cwd: tmp() });
    expect(c.jwtSecret).toBe('y'.repeat(40));
    expect(c.bootstrapAdminPassword).toBe('given-password');
    expect(c.bootstrapAdminPasswordGenerated).toBe(false);
  });

  it('never puts a secret into the error messages', () => {
    const problems = problemsOf({ ...PROD_SECRETS, SECRETS_KEY: 'dG9vLXNob3J0', JWT_SECRET: 'tiny-secret' });
    expect(problems.join('\n')).not.toMatch(/tiny-secret|dG9vLXNob3J0/);
  });
});

describe('JupyterLab host settings (SPEC §10)', () => {
  it('default to a local server on JUPYTERLAB_PORT and a token derived from INTERNAL_SERVICE_TOKEN', () => {
    const a = loadConfig({ env: { ...PROD_SECRETS }, cwd: tmp() });
    const b = loadConfig({ env: { ...PROD_SECRETS, JUPYTERLAB_PORT: '9000' }, cwd: tmp() });
    expect(a.jupyterlab.url).toBe('http://127.0.0.1:8095');
    expect(b.jupyterlab.url).toBe('http://127.0.0.1:9000');
    expect(a.jupyterlab.token).toMatch(/^[0-9a-f]{64}$/);
    expect(a.jupyterlab.token).toBe(b.jupyterlab.token);
    expect(a.jupyterlab.token).not.toContain(PROD_SECRETS.INTERNAL_SERVICE_TOKEN);
    const other = loadConfig({ env: { ...PROD_SECRETS, INTERNAL_SERVICE_TOKEN: 'other' }, cwd: tmp() });
    expect(other.jupyterlab.token).not.toBe(a.jupyterlab.token);
  });
  it('take JUPYTERLAB_URL and JUPYTERLAB_TOKEN when given, and reject a non-http URL', () => {
    const c = loadConfig({ env: { ...PROD_SECRETS, JUPYTERLAB_URL: 'http://10.0.0.5:8888/', JUPYTERLAB_TOKEN: 'tok' }, cwd: tmp() });
    expect(c.jupyterlab).toEqual({ url: 'http://10.0.0.5:8888', token: 'tok' });
    expect(problemsOf({ ...PROD_SECRETS, JUPYTERLAB_URL: 'ftp://x' }).join('\n')).toMatch(/JUPYTERLAB_URL/);
  });
});

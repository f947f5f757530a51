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
  it('applies the defaults of docs/contract/spec.md §2', () => {
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
      trustedProxies: [],
      logLevel: 'info',
      logFormat: 'auto',
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

  it('takes LOG_FORMAT json or pretty, and names the allowed values for anything else', () => {
    expect(loadConfig({ env: { LOG_FORMAT: 'JSON' }, cwd: tmp() }).logFormat).toBe('json');
    expect(loadConfig({ env: { LOG_FORMAT: 'pretty' }, cwd: tmp() }).logFormat).toBe('pretty');
    expect(problemsOf({ LOG_FORMAT: 'colour' })).toEqual([
      'LOG_FORMAT="colour" is not one of auto, json, pretty; unset it for pretty lines on a terminal and JSON otherwise',
    ]);
  });

  it('refuses half of the S3 credentials, naming the missing one', () => {
    expect(problemsOf({ S3_ACCESS_KEY_ID: 'id' })).toEqual([expect.stringContaining('S3_SECRET_ACCESS_KEY is missing')]);
    expect(problemsOf({ S3_SECRET_ACCESS_KEY: 'secret' })).toEqual([expect.stringContaining('S3_ACCESS_KEY_ID is missing')]);
    expect(problemsOf({ STORAGE_BACKEND: 'local', S3_ACCESS_KEY_ID: 'id' })).toEqual([]);
  });

  it('reports every bad variable at once', () => {
    const problems = problemsOf({
      PORT: 'eighty',
      JWT_TTL_SECONDS: '-1',
      LOG_LEVEL: 'loud',
      DATABASE_URL: 'mysql://x',
      RUNTIME_URL: 'ftp://x',
      S3_FORCE_PATH_STYLE: 'maybe',
    });
    expect(problems.map((p) => p.split(/[=\s]/)[0])).toEqual(
      expect.arrayContaining(['PORT', 'JWT_TTL_SECONDS', 'LOG_LEVEL', 'DATABASE_URL', 'RUNTIME_URL', 'S3_FORCE_PATH_STYLE']),
    );
  });

  it('takes LAB_ORIGIN with PLATFORM_ORIGIN, and not with the shared developer server (decision 0263)', () => {
    expect(loadConfig({ env: {}, cwd: tmp() }).labOrigins).toBeUndefined();
    const labs = loadConfig({ env: { LAB_ORIGIN: 'https://{workspace}.example-labs.net', PLATFORM_ORIGIN: 'https://example.com' }, cwd: tmp() }).labOrigins;
    expect(labs).toEqual({ protocol: 'https:', suffix: 'example-labs.net', platform: 'https://example.com' });
    expect(problemsOf({ LAB_ORIGIN: 'https://{workspace}.example-labs.net' })).toEqual([expect.stringContaining('LAB_ORIGIN needs PLATFORM_ORIGIN')]);
    expect(problemsOf({ LAB_ORIGIN: 'https://{workspace}.example-labs.net', PLATFORM_ORIGIN: 'https://example.com', JUPYTERLAB_URL: 'http://j:8095' })).toEqual(
      [expect.stringContaining('unset one of them')],
    );
  });

  it('takes several instances in BACKEND_URL, CLUSTER_ADMIN_URL, BRIDGE_URL and JUPYTERLAB_URL, the single form unchanged', () => {
    const single = loadConfig({ env: { BACKEND_URL: 'http://backend:8091/' }, cwd: tmp() });
    expect(single.backendUrls).toEqual(['http://backend:8091']);
    expect(single.backendUrl).toBe('http://backend:8091');
    expect(single.clusterAdminUrls).toEqual(['http://127.0.0.1:8093']);
    const many = loadConfig({
      env: {
        BACKEND_URL: ' http://10.0.0.1:8091, http://10.0.0.2:8091 ,',
        BRIDGE_URL: 'http://a:1,http://b:2',
        JUPYTERLAB_URL: 'http://j1:8095,http://j2:8095',
      },
      cwd: tmp(),
    });
    expect(many.backendUrls).toEqual(['http://10.0.0.1:8091', 'http://10.0.0.2:8091']);
    expect(many.backendUrl).toBe('http://10.0.0.1:8091');
    expect(many.bridgeUrls).toEqual(['http://a:1', 'http://b:2']);
    expect(many.jupyterlab.urls).toEqual(['http://j1:8095', 'http://j2:8095']);
    expect(problemsOf({ BACKEND_URL: 'http://ok:1,ftp://bad' })).toEqual([expect.stringMatching(/^BACKEND_URL="ftp:\/\/bad" is not an http\(s\) URL/)]);
    // The backend in the gateway's process is the one backend: not one of several.
    expect(loadConfig({ env: {}, cwd: tmp() }).backendInGateway).toBe(false);
    expect(loadConfig({ env: { BACKEND_IN_GATEWAY: 'true' }, cwd: tmp() }).backendInGateway).toBe(true);
    expect(problemsOf({ BACKEND_IN_GATEWAY: 'true', BACKEND_URL: 'http://a:1,http://b:2' })).toEqual([
      expect.stringMatching(/^BACKEND_IN_GATEWAY runs the one backend .* BACKEND_URL lists 2 instances/),
    ]);
    expect(problemsOf({ BACKEND_IN_GATEWAY: 'sometimes' })).toEqual([expect.stringMatching(/^BACKEND_IN_GATEWAY="sometimes" is not a boolean/)]);
    // The runtime keeps its kernels in memory: one instance, one address.
    expect(problemsOf({ RUNTIME_URL: 'http://r1:8092,http://r2:8092' })).toEqual([
      expect.stringMatching(/^RUNTIME_URL=.* names several addresses; this component runs as one instance/),
    ]);
  });

  it('reads GATEWAY_METRICS_PORT and WORKER_METRICS_PORT (unset: no such port)', () => {
    expect(loadConfig({ env: {}, cwd: tmp() })).toMatchObject({ gatewayMetricsPort: undefined, workerMetricsPort: undefined });
    expect(loadConfig({ env: { GATEWAY_METRICS_PORT: '9464', WORKER_METRICS_PORT: '9465' }, cwd: tmp() })).toMatchObject({
      gatewayMetricsPort: 9464,
      workerMetricsPort: 9465,
    });
    expect(problemsOf({ WORKER_METRICS_PORT: 'x' })).toEqual([expect.stringMatching(/^WORKER_METRICS_PORT="x" is not an integer/)]);
  });

  it('reads TRUSTED_PROXIES as addresses and CIDRs, and refuses anything else', () => {
    const c = loadConfig({ env: { TRUSTED_PROXIES: ' 10.0.0.5, 192.168.0.0/16 ,::1,fd00::/8' }, cwd: tmp() });
    expect(c.trustedProxies).toEqual(['10.0.0.5', '192.168.0.0/16', '::1', 'fd00::/8']);
    for (const bad of ['proxy.example', '10.0.0.0/33', '10.0.0.1/', '::1/129', '10.0.0.0/255.0.0.0', '*']) {
      const problems = problemsOf({ TRUSTED_PROXIES: `10.0.0.1,${bad}` });
      expect(problems, bad).toHaveLength(1);
      expect(problems[0]).toMatch(/^TRUSTED_PROXIES entry .* is not an IP address or CIDR/);
    }
  });

  it('reads GATEWAY_ADDRESSES the same way (default none: loopback only), and refuses anything else (decision 0257)', () => {
    expect(loadConfig({ env: {}, cwd: tmp() }).gatewayAddresses).toEqual([]);
    expect(loadConfig({ env: { GATEWAY_ADDRESSES: '10.0.0.0/8, 172.16.0.0/12' }, cwd: tmp() }).gatewayAddresses).toEqual(['10.0.0.0/8', '172.16.0.0/12']);
    const problems = problemsOf({ GATEWAY_ADDRESSES: '10.0.0.0/8,gateway' });
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(/^GATEWAY_ADDRESSES entry "gateway" is not an IP address or CIDR/);
  });

  it('requires secrets in production mode instead of generating them', () => {
    const problems = problemsOf({ NODE_ENV: 'production' });
    for (const name of ['JWT_SECRET', 'INTERNAL_SERVICE_TOKEN', 'ADMIN_TOKENS', 'SECRETS_KEY', 'AGENT_TOKEN', 'BOOTSTRAP_ADMIN_PASSWORD']) {
      expect(
        problems.some((p) => p.startsWith(name)),
        name,
      ).toBe(true);
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
    expect((JSON.parse(readFileSync(file, 'utf8')) as { JWT_SECRET: string }).JWT_SECRET).toBe(first.jwtSecret);
  });

  it('prefers given secrets over generated ones', () => {
    const c = loadConfig({ env: { JWT_SECRET: 'y'.repeat(40), BOOTSTRAP_ADMIN_PASSWORD: 'given-password' }, cwd: tmp() });
    expect(c.jwtSecret).toBe('y'.repeat(40));
    expect(c.bootstrapAdminPassword).toBe('given-password');
    expect(c.bootstrapAdminPasswordGenerated).toBe(false);
  });

  it('refuses user:password@ in CODEAGENT_BRIDGE_URL without echoing it, naming CODEAGENT_BRIDGE_USER/PASSWORD', () => {
    for (const url of ['http://agent:s3cret-pw@127.0.0.1:4096', 'http://only-user@127.0.0.1:4096', 'https://:s3cret-pw@agent.internal']) {
      const problems = problemsOf({ ...PROD_SECRETS, CODEAGENT_BRIDGE_URL: url });
      expect(problems, url).toEqual([
        expect.stringMatching(/^CODEAGENT_BRIDGE_URL must not contain user:password@.*CODEAGENT_BRIDGE_USER and CODEAGENT_BRIDGE_PASSWORD/),
      ]);
      expect(problems.join('\n')).not.toMatch(/s3cret-pw|only-user/);
    }
    expect(problemsOf({ ...PROD_SECRETS, CODEAGENT_BRIDGE_URL: 'ftp://agent:s3cret-pw@host' })).toEqual([expect.not.stringMatching(/s3cret-pw/) as unknown]);
    expect(loadConfig({ env: { ...PROD_SECRETS, CODEAGENT_BRIDGE_URL: 'http://127.0.0.1:4096' }, cwd: tmp() }).bridge.url).toBe('http://127.0.0.1:4096');
    expect(loadConfig({ env: { ...PROD_SECRETS }, cwd: tmp() }).bridge.url).toBeUndefined();
  });

  it('never puts a secret into the error messages', () => {
    const problems = problemsOf({ ...PROD_SECRETS, SECRETS_KEY: 'dG9vLXNob3J0', JWT_SECRET: 'tiny-secret' });
    expect(problems.join('\n')).not.toMatch(/tiny-secret|dG9vLXNob3J0/);
  });
});

describe('JupyterLab host settings (docs/contract/spec.md §10)', () => {
  it('default to the runtime (per-workspace JupyterLab, issue 15) and a token derived from INTERNAL_SERVICE_TOKEN', () => {
    const a = loadConfig({ env: { ...PROD_SECRETS }, cwd: tmp() });
    const b = loadConfig({ env: { ...PROD_SECRETS, RUNTIME_PORT: '9000' }, cwd: tmp() });
    expect(a.jupyterlab.url).toBe('http://127.0.0.1:8092');
    expect(a.jupyterlab.shared).toBe(false);
    expect(b.jupyterlab.url).toBe('http://127.0.0.1:9000');
    expect(a.jupyterlab.token).toMatch(/^[0-9a-f]{64}$/);
    expect(a.jupyterlab.token).toBe(b.jupyterlab.token);
    expect(a.jupyterlab.token).not.toContain(PROD_SECRETS.INTERNAL_SERVICE_TOKEN);
    const other = loadConfig({ env: { ...PROD_SECRETS, INTERNAL_SERVICE_TOKEN: 'other' }, cwd: tmp() });
    expect(other.jupyterlab.token).not.toBe(a.jupyterlab.token);
  });
  it('take JUPYTERLAB_URL and JUPYTERLAB_TOKEN when given, and reject a non-http URL', () => {
    const c = loadConfig({ env: { ...PROD_SECRETS, JUPYTERLAB_URL: 'http://10.0.0.5:8888/', JUPYTERLAB_TOKEN: 'tok' }, cwd: tmp() });
    expect(c.jupyterlab).toEqual({ url: 'http://10.0.0.5:8888', urls: ['http://10.0.0.5:8888'], shared: true, token: 'tok' });
    expect(problemsOf({ ...PROD_SECRETS, JUPYTERLAB_URL: 'ftp://x' }).join('\n')).toMatch(/JUPYTERLAB_URL/);
  });
});

describe('run flood limits, quota and retention (docs/contract/spec.md §4.5)', () => {
  it('default to 60 s between fires, 50 schedules, 100 queued runs, no quota, 30 days of runs, 50 versions', () => {
    const c = loadConfig({ env: { ...PROD_SECRETS }, cwd: tmp() });
    expect(c.runLimits).toEqual({ scheduleMinIntervalSeconds: 60, maxSchedulesPerWorkspace: 50, maxQueuedRunsPerWorkspace: 100 });
    expect(c.workspaceQuotaBytes).toBeUndefined();
    expect(c.retention).toEqual({ runDays: 30, versionCount: 50, versionDays: 0 });
  });
  it('take given values, and name each bad one', () => {
    const c = loadConfig({
      env: {
        ...PROD_SECRETS,
        SCHEDULE_MIN_INTERVAL_SECONDS: '300',
        MAX_SCHEDULES_PER_WORKSPACE: '5',
        MAX_QUEUED_RUNS_PER_WORKSPACE: '7',
        WORKSPACE_QUOTA_BYTES: '1048576',
        RUN_RETENTION_DAYS: '0',
        VERSION_RETENTION_COUNT: '3',
        VERSION_RETENTION_DAYS: '14',
      },
      cwd: tmp(),
    });
    expect(c.runLimits).toEqual({ scheduleMinIntervalSeconds: 300, maxSchedulesPerWorkspace: 5, maxQueuedRunsPerWorkspace: 7 });
    expect(c.workspaceQuotaBytes).toBe(1048576);
    expect(c.retention).toEqual({ runDays: 0, versionCount: 3, versionDays: 14 });
    const problems = problemsOf({
      ...PROD_SECRETS,
      SCHEDULE_MIN_INTERVAL_SECONDS: '0',
      MAX_QUEUED_RUNS_PER_WORKSPACE: 'lots',
      WORKSPACE_QUOTA_BYTES: '10GB',
      RUN_RETENTION_DAYS: '-1',
    });
    expect(problems.map((p) => p.split('=')[0]).sort()).toEqual([
      'MAX_QUEUED_RUNS_PER_WORKSPACE',
      'RUN_RETENTION_DAYS',
      'SCHEDULE_MIN_INTERVAL_SECONDS',
      'WORKSPACE_QUOTA_BYTES',
    ]);
    expect(problems.find((p) => p.startsWith('WORKSPACE_QUOTA_BYTES'))).toMatch(/unset it for no limit/);
  });
});

describe('kernel sandbox settings (issue 13)', () => {
  it('default to on, with limits per workspace and per kernel', () => {
    const c = loadConfig({ env: { ...PROD_SECRETS }, cwd: tmp() });
    expect(c.sandbox).toMatchObject({
      enabled: true,
      uidBase: 1_900_000_000,
      memoryBytes: 4096 * 1024 * 1024,
      pidsMax: 512,
      cpus: 1,
      kernelMemoryBytes: 2048 * 1024 * 1024,
      kernelPidsMax: 256,
      maxServers: 16,
      idleSeconds: 900,
      cgroupParent: undefined,
    });
  });
  it('take KERNEL_SANDBOX=off and decimal CPUs, and reject nonsense', () => {
    const c = loadConfig({ env: { ...PROD_SECRETS, KERNEL_SANDBOX: 'off', SANDBOX_CPUS: '0.5', KERNEL_MEMORY_MB: '256' }, cwd: tmp() });
    expect(c.sandbox.enabled).toBe(false);
    expect(c.sandbox.cpus).toBe(0.5);
    expect(c.sandbox.kernelMemoryBytes).toBe(256 * 1024 * 1024);
    expect(problemsOf({ ...PROD_SECRETS, KERNEL_SANDBOX: 'maybe' }).join('\n')).toMatch(/KERNEL_SANDBOX/);
    expect(problemsOf({ ...PROD_SECRETS, SANDBOX_CPUS: 'lots' }).join('\n')).toMatch(/SANDBOX_CPUS/);
    expect(problemsOf({ ...PROD_SECRETS, SANDBOX_CGROUP_PARENT: '../../escape' }).join('\n')).toMatch(/SANDBOX_CGROUP_PARENT/);
  });
  it('refuses an external Jupyter server while the sandbox is on (it could not be sandboxed)', () => {
    expect(problemsOf({ ...PROD_SECRETS, JUPYTER_URL: 'http://127.0.0.1:8888' }).join('\n')).toMatch(/JUPYTER_URL .* cannot sandbox/);
    expect(problemsOf({ ...PROD_SECRETS, JUPYTER_URL: 'http://127.0.0.1:8888', KERNEL_SANDBOX: 'off' })).toEqual([]);
  });
});

describe('warm kernel pool settings (issue 17)', () => {
  it('default to one warm kernel per workspace, four in all, emptied after 600 s; 0 turns the pool off; nonsense is refused', () => {
    expect(loadConfig({ env: { ...PROD_SECRETS }, cwd: tmp() }).jupyter).toMatchObject({ poolSize: 1, poolMax: 4, poolIdleSeconds: 600 });
    expect(loadConfig({ env: { ...PROD_SECRETS, KERNEL_POOL_SIZE: '0' }, cwd: tmp() }).jupyter.poolSize).toBe(0);
    expect(problemsOf({ ...PROD_SECRETS, KERNEL_POOL_SIZE: '-1' }).join('\n')).toMatch(/KERNEL_POOL_SIZE/);
    expect(problemsOf({ ...PROD_SECRETS, KERNEL_POOL_IDLE_SECONDS: '0' }).join('\n')).toMatch(/KERNEL_POOL_IDLE_SECONDS/);
  });
});

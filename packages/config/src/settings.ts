import { createHmac } from 'node:crypto';
import { resolve, join } from 'node:path';
import { loadOrCreateSecrets } from './secrets.js';

export type StorageBackend = 's3' | 'local';

/** Every setting of SPEC §2, parsed and validated. Secrets are plain strings: never log this object. */
export interface Config {
  mode: 'development' | 'production';
  host: string;
  port: number;
  /** Listening address of the internal components (backend, runtime, …): loopback unless in a container. */
  componentHost: string;
  backendPort: number;
  runtimePort: number;
  clusterAdminPort: number;
  bridgePort: number;
  jupyterlabPort: number;
  dataDir: string;
  databaseUrl: string | undefined;
  storageBackend: StorageBackend;
  localStorageBaseDir: string;
  s3: {
    endpoint: string | undefined;
    region: string | undefined;
    accessKeyId: string | undefined;
    secretAccessKey: string | undefined;
    forcePathStyle: boolean;
    buckets: { workspace: string; version: string; run_log: string; trash: string };
  };
  internalServiceToken: string;
  jwtSecret: string;
  jwtTtlSeconds: number;
  bootstrapAdminEmail: string;
  bootstrapAdminPassword: string;
  /** True when the bootstrap password was generated (and may therefore be printed to the operator). */
  bootstrapAdminPasswordGenerated: boolean;
  runtimeUrl: string;
  backendUrl: string;
  clusterAdminUrl: string;
  bridgeUrl: string;
  adminTokens: string[];
  secretsKey: Buffer;
  agentToken: string;
  /** Browser origins (host names) allowed to call /mcp besides loopback (DNS-rebinding guard). */
  mcpAllowedOrigins: string[];
  outbound: {
    allowlist: string[];
    maxRedirects: number;
    timeoutMs: number;
    maxResponseBytes: number;
    allowLoopback: boolean;
  };
  bridge: {
    url: string | undefined;
    user: string | undefined;
    password: string | undefined;
    workdir: string;
    allowedHosts: string[];
  };
  /** Kernels of the runtime: a Jupyter server it starts (with `python`), or one at `url`. */
  jupyter: {
    url: string | undefined;
    token: string | undefined;
    python: string;
    cullIdleSeconds: number;
  };
  worker: {
    leaseSeconds: number;
    concurrency: number;
    pollMs: number;
    runTimeoutSeconds: number;
  };
  maxUploadBytes: number;
  logLevel: string;
  /** The JupyterLab server (with the bridge extension) behind the gateway's `/jupyter/` (SPEC §10). */
  jupyterlab: {
    url: string;
    /** Its token, injected by the gateway; users never see it. */
    token: string;
  };
}

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid settings:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ConfigError';
  }
}

export interface LoadOptions {
  /** Defaults to process.env. */
  env?: NodeJS.ProcessEnv;
  /** Directory relative paths are resolved against; defaults to process.cwd(). */
  cwd?: string;
}

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

/**
 * Without JUPYTERLAB_TOKEN, the gateway and the JupyterLab server (both started from the same
 * settings) agree on a token derived from INTERNAL_SERVICE_TOKEN, so no new secret is stored.
 */
function derivedJupyterlabToken(internalServiceToken: string): string {
  if (internalServiceToken === '') return '';
  return createHmac('sha256', internalServiceToken).update('codeagent jupyterlab token').digest('hex');
}

/** Production mode (NODE_ENV=production) never generates secrets: they must be given. */
export function isProductionMode(env: NodeJS.ProcessEnv = process.env): boolean {
  return env.NODE_ENV === 'production';
}

/**
 * Reads every setting once, at start. All problems are collected and reported together,
 * each naming the variable and how to fix it, so an operator fixes them in one round.
 */
export function loadConfig(options: LoadOptions = {}): Config {
  const env = options.env ?? process.env;
  const cwd = options.cwd ?? process.cwd();
  const problems: string[] = [];
  const production = isProductionMode(env);

  const str = (name: string): string | undefined => {
    const v = env[name];
    return v === undefined || v.trim() === '' ? undefined : v.trim();
  };
  const int = (name: string, def: number, min: number, max = Number.MAX_SAFE_INTEGER): number => {
    const raw = str(name);
    if (raw === undefined) return def;
    if (!/^\d+$/.test(raw) || Number(raw) < min || Number(raw) > max) {
      problems.push(`${name}=${JSON.stringify(raw)} is not an integer between ${min} and ${max}; set a whole number or unset it for the default ${def}`);
      return def;
    }
    return Number(raw);
  };
  const bool = (name: string, def: boolean): boolean => {
    const raw = str(name)?.toLowerCase();
    if (raw === undefined) return def;
    if (['1', 'true', 'yes', 'on'].includes(raw)) return true;
    if (['0', 'false', 'no', 'off'].includes(raw)) return false;
    problems.push(`${name}=${JSON.stringify(raw)} is not a boolean; use true or false`);
    return def;
  };
  const list = (name: string): string[] =>
    (str(name) ?? '')
      .split(',')
      .map((s) => s.trim())
      .filter((s) => s.length > 0);
  const url = (name: string, def: string): string => {
    const raw = str(name) ?? def;
    try {
      const u = new URL(raw);
      if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new Error('scheme');
    } catch {
      problems.push(`${name}=${JSON.stringify(raw)} is not an http(s) URL; set e.g. http://127.0.0.1:8091`);
    }
    return raw.replace(/\/+$/, '');
  };

  const dataDir = resolve(cwd, str('DATA_DIR') ?? './.codeagent');

  // Secrets: given by the operator, or generated once into DATA_DIR in development mode.
  const secretNames = ['JWT_SECRET', 'INTERNAL_SERVICE_TOKEN', 'ADMIN_TOKENS', 'SECRETS_KEY', 'AGENT_TOKEN'] as const;
  const needGenerated = !production && (secretNames.some((n) => str(n) === undefined) || str('BOOTSTRAP_ADMIN_PASSWORD') === undefined);
  const generated = needGenerated ? loadOrCreateSecrets(dataDir) : undefined;
  const secret = (name: (typeof secretNames)[number]): string => {
    const v = str(name) ?? generated?.[name];
    if (v === undefined) {
      problems.push(`${name} is required when NODE_ENV=production; set it to a long random value (e.g. \`openssl rand -base64 32\`)`);
      return '';
    }
    return v;
  };

  const storageRaw = str('STORAGE_BACKEND') ?? 's3';
  if (storageRaw !== 's3' && storageRaw !== 'local') {
    problems.push(`STORAGE_BACKEND=${JSON.stringify(storageRaw)} is not supported; use "s3" or "local"`);
  }
  const storageBackend: StorageBackend = storageRaw === 'local' ? 'local' : 's3';

  const databaseUrl = str('DATABASE_URL');
  if (databaseUrl !== undefined && !/^postgres(ql)?:\/\//.test(databaseUrl)) {
    problems.push('DATABASE_URL must start with postgres:// or postgresql://; unset it to use the embedded database in DATA_DIR');
  }

  const port = int('PORT', 8080, 0, 65535);
  const backendPort = int('BACKEND_PORT', 8091, 0, 65535);
  const runtimePort = int('RUNTIME_PORT', 8092, 0, 65535);
  const clusterAdminPort = int('CLUSTER_ADMIN_PORT', 8093, 0, 65535);
  const bridgePort = int('BRIDGE_PORT', 8094, 0, 65535);
  const jupyterlabPort = int('JUPYTERLAB_PORT', 8095, 0, 65535);

  const jwtSecret = secret('JWT_SECRET');
  const internalServiceToken = secret('INTERNAL_SERVICE_TOKEN');
  if (jwtSecret !== '' && Buffer.byteLength(jwtSecret) < 32) {
    problems.push('JWT_SECRET is shorter than 32 bytes; use a longer random value (e.g. `openssl rand -base64 48`)');
  }

  const secretsKeyRaw = secret('SECRETS_KEY');
  let secretsKey = Buffer.alloc(0);
  if (secretsKeyRaw !== '') {
    secretsKey = Buffer.from(secretsKeyRaw, 'base64');
    if (secretsKey.length !== 32) {
      problems.push('SECRETS_KEY must be 32 bytes encoded as base64; generate one with `openssl rand -base64 32`');
    }
  }

  const adminTokensRaw = secret('ADMIN_TOKENS');
  const adminTokens = adminTokensRaw
    .split(',')
    .map((t) => t.trim())
    .filter((t) => t.length > 0);

  const bootstrapPasswordGiven = str('BOOTSTRAP_ADMIN_PASSWORD');
  const bootstrapAdminPassword = bootstrapPasswordGiven ?? generated?.BOOTSTRAP_ADMIN_PASSWORD ?? '';
  if (bootstrapAdminPassword === '') {
    problems.push('BOOTSTRAP_ADMIN_PASSWORD is required when NODE_ENV=production; set the first administrator\'s password');
  }
  const bootstrapAdminEmail = (str('BOOTSTRAP_ADMIN_EMAIL') ?? 'admin@localhost').toLowerCase();
  if (!/^[^@\s]+@[^@\s]+$/.test(bootstrapAdminEmail)) {
    problems.push(`BOOTSTRAP_ADMIN_EMAIL=${JSON.stringify(bootstrapAdminEmail)} is not an email address`);
  }

  const logLevel = str('LOG_LEVEL') ?? 'info';
  if (!LOG_LEVELS.includes(logLevel)) {
    problems.push(`LOG_LEVEL=${JSON.stringify(logLevel)} is not one of ${LOG_LEVELS.join(', ')}`);
  }

  const config: Config = {
    mode: production ? 'production' : 'development',
    host: str('HOST') ?? '127.0.0.1',
    componentHost: str('COMPONENT_HOST') ?? '127.0.0.1',
    port,
    backendPort,
    runtimePort,
    clusterAdminPort,
    bridgePort,
    jupyterlabPort,
    dataDir,
    databaseUrl,
    storageBackend,
    localStorageBaseDir: resolve(cwd, str('LOCAL_STORAGE_BASE_DIR') ?? join(dataDir, 'storage')),
    s3: {
      endpoint: str('S3_ENDPOINT'),
      region: str('S3_REGION'),
      accessKeyId: str('S3_ACCESS_KEY_ID'),
      secretAccessKey: str('S3_SECRET_ACCESS_KEY'),
      forcePathStyle: bool('S3_FORCE_PATH_STYLE', false),
      buckets: {
        workspace: str('S3_BUCKET_WORKSPACE') ?? 'codeagent-workspace',
        version: str('S3_BUCKET_VERSION') ?? 'codeagent-version',
        run_log: str('S3_BUCKET_RUN_LOG') ?? 'codeagent-run-log',
        trash: str('S3_BUCKET_TRASH') ?? 'codeagent-trash',
      },
    },
    internalServiceToken,
    jwtSecret,
    jwtTtlSeconds: int('JWT_TTL_SECONDS', 3600, 60, 60 * 60 * 24 * 30),
    bootstrapAdminEmail,
    bootstrapAdminPassword,
    bootstrapAdminPasswordGenerated: bootstrapPasswordGiven === undefined,
    runtimeUrl: url('RUNTIME_URL', `http://127.0.0.1:${runtimePort}`),
    backendUrl: url('BACKEND_URL', `http://127.0.0.1:${backendPort}`),
    clusterAdminUrl: url('CLUSTER_ADMIN_URL', `http://127.0.0.1:${clusterAdminPort}`),
    bridgeUrl: url('BRIDGE_URL', `http://127.0.0.1:${bridgePort}`),
    adminTokens,
    secretsKey,
    agentToken: secret('AGENT_TOKEN'),
    mcpAllowedOrigins: list('MCP_ALLOWED_ORIGINS').map((h) => h.toLowerCase()),
    outbound: {
      allowlist: list('OUTBOUND_ALLOWLIST'),
      maxRedirects: int('OUTBOUND_MAX_REDIRECTS', 5, 0, 50),
      timeoutMs: int('OUTBOUND_TIMEOUT_MS', 10000, 1),
      maxResponseBytes: int('OUTBOUND_MAX_RESPONSE_BYTES', 1048576, 1),
      allowLoopback: bool('OUTBOUND_ALLOW_LOOPBACK', false),
    },
    bridge: {
      url: str('CODEAGENT_BRIDGE_URL'),
      user: str('CODEAGENT_BRIDGE_USER'),
      password: env.CODEAGENT_BRIDGE_PASSWORD === '' ? undefined : env.CODEAGENT_BRIDGE_PASSWORD,
      workdir: resolve(cwd, str('CODEAGENT_BRIDGE_WORKDIR') ?? cwd),
      allowedHosts: list('CODEAGENT_BRIDGE_ALLOWED_HOSTS').map((h) => h.toLowerCase()),
    },
    jupyter: {
      url: str('JUPYTER_URL') === undefined ? undefined : url('JUPYTER_URL', ''),
      token: str('JUPYTER_TOKEN'),
      python: str('JUPYTER_PYTHON') ?? '/usr/bin/python3',
      cullIdleSeconds: int('KERNEL_CULL_IDLE_SECONDS', 3600, 0),
    },
    worker: {
      leaseSeconds: int('WORKER_LEASE_SECONDS', 30, 1, 3600),
      concurrency: int('WORKER_CONCURRENCY', 2, 1, 64),
      pollMs: int('WORKER_POLL_MS', 1000, 10, 60_000),
      runTimeoutSeconds: int('RUN_TIMEOUT_SECONDS', 3600, 1, 7 * 24 * 3600),
    },
    maxUploadBytes: int('MAX_UPLOAD_BYTES', 10 * 1024 ** 3, 1),
    logLevel,
    jupyterlab: {
      url: url('JUPYTERLAB_URL', `http://127.0.0.1:${jupyterlabPort}`),
      token: str('JUPYTERLAB_TOKEN') ?? derivedJupyterlabToken(internalServiceToken),
    },
  };

  if (problems.length > 0) throw new ConfigError(problems);
  return config;
}

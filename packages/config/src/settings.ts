import { createHmac } from 'node:crypto';
import { isIP } from 'node:net';
import { resolve, join, relative, isAbsolute } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadOrCreateSecrets } from './secrets.js';
import { parseLabOrigins, type LabOrigins } from './lab-origin.js';

export type StorageBackend = 's3' | 'local';
export type LogFormat = 'auto' | 'json' | 'pretty';
export const LOG_FORMATS: readonly LogFormat[] = ['auto', 'json', 'pretty'];

/** Every setting of docs/contract/spec.md §2, parsed and validated. Secrets are plain strings: never log this object. */
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
  /**
   * Without DATABASE_URL: the passwords of the embedded PostgreSQL (generated once into
   * DATA_DIR/secrets.json). Undefined with DATABASE_URL, and in production mode, which
   * needs DATABASE_URL to open the database.
   */
  embeddedDatabase: { password: string; superuserPassword: string } | undefined;
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
  /** The first of `backendUrls` (callers that need one address). */
  backendUrl: string;
  clusterAdminUrl: string;
  bridgeUrl: string;
  /**
   * Every instance of a component that may run several times (comma-separated in BACKEND_URL,
   * CLUSTER_ADMIN_URL, BRIDGE_URL): the gateway balances over them, the worker fails over.
   */
  backendUrls: string[];
  /**
   * BACKEND_IN_GATEWAY: the gateway's process also runs the backend (still listening on
   * BACKEND_PORT for the other components) and hands it the API requests without a network hop
   * (docs/decisions/0194). `codeagent start` then starts no backend process of its own.
   */
  backendInGateway: boolean;
  clusterAdminUrls: string[];
  bridgeUrls: string[];
  /** Metrics, liveness and readiness of the two components without an internal port of their own; undefined = none. */
  gatewayMetricsPort: number | undefined;
  workerMetricsPort: number | undefined;
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
    /** Warm kernels for runs (decision 0125): per workspace, over all, and how long an unused pool lives. */
    poolSize: number;
    poolMax: number;
    poolIdleSeconds: number;
  };
  /** The kernel sandbox (issue 13): how user code is confined and limited. */
  sandbox: {
    /** KERNEL_SANDBOX: false only for a single developer on their own machine. */
    enabled: boolean;
    uidBase: number;
    /** Limits of one workspace's sandbox (its Jupyter server and every kernel together). */
    memoryBytes: number;
    pidsMax: number;
    cpus: number;
    /** Limits of one kernel. */
    kernelMemoryBytes: number;
    kernelPidsMax: number;
    /** Sizes of the sandbox's private /workspace and /tmp (tmpfs). */
    diskBytes: number;
    tmpBytes: number;
    /** Workspace Jupyter servers running at once, and how long one without kernels lives. */
    maxServers: number;
    idleSeconds: number;
    /** A run's files copied into and out of the sandbox, in each direction. */
    filesMaxBytes: number;
    /** cgroup v2 only: an empty, delegated cgroup for the sandboxes (relative to the cgroup2 mount). */
    cgroupParent: string | undefined;
  };
  worker: {
    leaseSeconds: number;
    concurrency: number;
    pollMs: number;
    runTimeoutSeconds: number;
    /** Runs of one workspace running at once, over every worker (decision 0234). */
    maxRunningPerWorkspace: number;
  };
  /** Run flood limits (docs/contract/spec.md §4.5). */
  runLimits: {
    scheduleMinIntervalSeconds: number;
    maxSchedulesPerWorkspace: number;
    maxQueuedRunsPerWorkspace: number;
  };
  /** Per-workspace storage limit in bytes (objects + versions + trash); undefined = none. */
  workspaceQuotaBytes: number | undefined;
  /** How long run outputs and old versions are kept; 0 = no limit of that kind. */
  retention: {
    runDays: number;
    versionCount: number;
    versionDays: number;
  };
  maxUploadBytes: number;
  /**
   * Addresses or CIDRs of the proxies in front of the gateway (TLS terminators, load balancers)
   * whose X-Forwarded-For/-Proto/-Host the gateway believes (docs/contract/spec.md §4.5); empty: nobody's.
   */
  trustedProxies: string[];
  /**
   * GATEWAY_ADDRESSES: where the gateway reaches the backend from (addresses or CIDRs), besides
   * loopback: only their X-Forwarded-For/-Proto are believed by the backend (its per-address login
   * throttling, the cookie's `Secure`; decision 0257). Containers set their private networks.
   */
  gatewayAddresses: string[];
  logLevel: string;
  /** LOG_FORMAT: `pretty` lines for a person, `json` lines for a collector; `auto` (unset) is pretty on a terminal. */
  logFormat: LogFormat;
  /** The JupyterLab server (with the bridge extension) behind the gateway's `/jupyter/` (docs/contract/spec.md §10). */
  jupyterlab: {
    /** The first of `urls`. */
    url: string;
    /** Its instances (JUPYTERLAB_URL, comma-separated); the gateway keeps each user on one. */
    urls: string[];
    /** Its token, injected by the gateway; users never see it. */
    token: string;
    /**
     * JUPYTERLAB_URL was set: `/jupyter/` is the one shared developer server of `codeagent
     * jupyterlab` (system administrators only). Unset: the runtime (RUNTIME_URL) serves each
     * workspace's JupyterLab at `/jupyter/<workspace id>/` (issue 15).
     */
    shared: boolean;
  };
  /**
   * LAB_ORIGIN (with PLATFORM_ORIGIN): each workspace's JupyterLab on a host of its own, where
   * its outputs' scripts may run (decision 0263); undefined: at `/jupyter/<id>/` of the platform's origin.
   */
  labOrigins: LabOrigins | undefined;
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

/** The directory the platform's code was installed in (the checkout), four levels above this file. */
const CHECKOUT = fileURLToPath(new URL('../../../', import.meta.url)).replace(/\/$/, '');

/** True when `dir` is `target` or one of its ancestors. */
function isSameOrAncestor(dir: string, target: string): boolean {
  const rel = relative(dir, target);
  return rel === '' || (!rel.startsWith('..') && !isAbsolute(rel));
}

/** Why a file-system error makes DATA_DIR unusable, in words. */
function fsReason(err: unknown): string {
  const code = (err as NodeJS.ErrnoException).code;
  if (code === 'ENOSPC') return 'the disk is full';
  if (code === 'EACCES' || code === 'EPERM') return 'this user may not write there';
  if (code === 'EROFS') return 'it is on a read-only file system';
  if (code === 'ENOENT' || code === 'ENOTDIR') return 'a parent is missing or is not a directory';
  return (err as Error).message;
}

/** An IPv4 or IPv6 address, or one with a prefix length (CIDR), as TRUSTED_PROXIES takes them. */
export function isAddressOrCidr(entry: string): boolean {
  const slash = entry.indexOf('/');
  const address = slash === -1 ? entry : entry.slice(0, slash);
  const family = isIP(address);
  if (family === 0) return false;
  if (slash === -1) return true;
  const prefix = entry.slice(slash + 1);
  return /^\d{1,3}$/.test(prefix) && Number(prefix) <= (family === 4 ? 32 : 128);
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
  /** A whole number or unset (undefined): for limits that are off unless given. */
  const optionalInt = (name: string, min: number): number | undefined => {
    const raw = str(name);
    if (raw === undefined) return undefined;
    if (!/^\d+$/.test(raw) || Number(raw) < min || !Number.isSafeInteger(Number(raw))) {
      problems.push(`${name}=${JSON.stringify(raw)} is not a whole number of at least ${min}; set one, or unset it for no limit`);
      return undefined;
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
  const decimal = (name: string, def: number, min: number, max: number): number => {
    const raw = str(name);
    if (raw === undefined) return def;
    if (!/^\d+(\.\d+)?$/.test(raw) || Number(raw) < min || Number(raw) > max) {
      problems.push(`${name}=${JSON.stringify(raw)} is not a number between ${min} and ${max}; unset it for the default ${def}`);
      return def;
    }
    return Number(raw);
  };
  const url = (name: string, def: string, raw = str(name) ?? def): string => {
    if (raw.includes(',')) {
      problems.push(`${name}=${JSON.stringify(raw)} names several addresses; this component runs as one instance: give one URL`);
      return raw;
    }
    try {
      const u = new URL(raw);
      if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new Error('scheme');
    } catch {
      problems.push(`${name}=${JSON.stringify(raw)} is not an http(s) URL; set e.g. http://127.0.0.1:8091`);
    }
    return raw.replace(/\/+$/, '');
  };
  /** One address, or several instances separated by commas (the first is the one single callers use). */
  const urls = (name: string, def: string): string[] => {
    const entries = (str(name) ?? def)
      .split(',')
      .map((s) => s.trim())
      .filter((s) => s !== '');
    if (entries.length === 0) entries.push(def);
    return entries.map((entry) => url(name, def, entry));
  };
  /**
   * CODEAGENT_BRIDGE_URL (docs/contract/spec.md §9.1): an http(s) URL without `user:password@`.
   * The bridge shows this URL to anyone (`GET /codeagent-bridge/health`) and in its 502 messages;
   * the code agent's credentials have settings of their own. The value is never echoed: it may
   * hold a password.
   */
  const bridgeAgentUrl = (): string | undefined => {
    const raw = str('CODEAGENT_BRIDGE_URL');
    if (raw === undefined) return undefined;
    let u: URL;
    try {
      u = new URL(raw);
      if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new Error('scheme');
    } catch {
      problems.push('CODEAGENT_BRIDGE_URL is not an http(s) URL (the value is not shown: it may hold a password); set e.g. http://127.0.0.1:4096');
      return undefined;
    }
    if (u.username !== '' || u.password !== '') {
      problems.push(
        'CODEAGENT_BRIDGE_URL must not contain user:password@ (it is shown by GET /codeagent-bridge/health and in error messages); put the URL without them and set CODEAGENT_BRIDGE_USER and CODEAGENT_BRIDGE_PASSWORD',
      );
      return undefined;
    }
    return raw;
  };
  const optionalPort = (name: string): number | undefined => {
    const raw = str(name);
    if (raw === undefined) return undefined;
    return int(name, 0, 1, 65535);
  };

  const dataDir = resolve(cwd, str('DATA_DIR') ?? './.codeagent');

  // Secrets: given by the operator, or generated once into DATA_DIR in development mode.
  const secretNames = ['JWT_SECRET', 'INTERNAL_SERVICE_TOKEN', 'ADMIN_TOKENS', 'SECRETS_KEY', 'AGENT_TOKEN'] as const;
  const needGenerated =
    !production && (secretNames.some((n) => str(n) === undefined) || str('BOOTSTRAP_ADMIN_PASSWORD') === undefined || str('DATABASE_URL') === undefined);
  let generated: ReturnType<typeof loadOrCreateSecrets> | undefined;
  if (needGenerated) {
    try {
      generated = loadOrCreateSecrets(dataDir);
    } catch (err) {
      problems.push(`DATA_DIR=${JSON.stringify(dataDir)} cannot be used: ${fsReason(err)}; choose a writable directory with free space`);
    }
  }
  const secret = (name: (typeof secretNames)[number]): string => {
    const v = str(name) ?? generated?.[name];
    if (v === undefined && !production) return ''; // DATA_DIR could not hold the generated secrets: said once above
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

  if (storageBackend === 's3' && (str('S3_ACCESS_KEY_ID') === undefined) !== (str('S3_SECRET_ACCESS_KEY') === undefined)) {
    const missing = str('S3_ACCESS_KEY_ID') === undefined ? 'S3_ACCESS_KEY_ID' : 'S3_SECRET_ACCESS_KEY';
    problems.push(`${missing} is missing: S3_ACCESS_KEY_ID and S3_SECRET_ACCESS_KEY go together; set both, or neither to use the AWS credential chain`);
  }

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
  if (bootstrapAdminPassword === '' && production) {
    problems.push("BOOTSTRAP_ADMIN_PASSWORD is required when NODE_ENV=production; set the first administrator's password");
  }
  const bootstrapAdminEmail = (str('BOOTSTRAP_ADMIN_EMAIL') ?? 'admin@localhost').toLowerCase();
  if (!/^[^@\s]+@[^@\s]+$/.test(bootstrapAdminEmail)) {
    problems.push(`BOOTSTRAP_ADMIN_EMAIL=${JSON.stringify(bootstrapAdminEmail)} is not an email address`);
  }

  // The code agent's project directory holds user text: never DATA_DIR (secrets), the checkout, or an ancestor of either.
  const bridgeWorkdir = resolve(cwd, str('CODEAGENT_BRIDGE_WORKDIR') ?? join(dataDir, 'agent'));
  for (const [what, dir] of [
    ['DATA_DIR', dataDir],
    ['the checkout', CHECKOUT],
  ] as const) {
    if (isSameOrAncestor(bridgeWorkdir, dir)) {
      problems.push(
        `CODEAGENT_BRIDGE_WORKDIR=${JSON.stringify(bridgeWorkdir)} is ${what} or contains it; use an empty directory of its own (default: DATA_DIR/agent)`,
      );
    }
  }

  const trustedProxies = list('TRUSTED_PROXIES');
  for (const entry of trustedProxies) {
    if (!isAddressOrCidr(entry)) {
      problems.push(`TRUSTED_PROXIES entry ${JSON.stringify(entry)} is not an IP address or CIDR; list your proxies' addresses, e.g. 10.0.0.5,192.168.1.0/24`);
    }
  }

  const gatewayAddresses = list('GATEWAY_ADDRESSES');
  for (const entry of gatewayAddresses) {
    if (!isAddressOrCidr(entry)) {
      problems.push(
        `GATEWAY_ADDRESSES entry ${JSON.stringify(entry)} is not an IP address or CIDR; list where the gateway reaches the backend from, e.g. 10.0.0.0/8,172.16.0.0/12`,
      );
    }
  }

  const sandboxRaw = (str('KERNEL_SANDBOX') ?? 'on').toLowerCase();
  if (!['on', 'off', 'true', 'false', '1', '0'].includes(sandboxRaw)) {
    problems.push(`KERNEL_SANDBOX=${JSON.stringify(sandboxRaw)} is not on or off; leave it unset (on)`);
  }
  const sandboxEnabled = !['off', 'false', '0'].includes(sandboxRaw);
  if (sandboxEnabled && str('JUPYTER_URL') !== undefined) {
    problems.push(
      'JUPYTER_URL points at a Jupyter server the platform cannot sandbox; unset it (the runtime starts sandboxed servers itself), or set KERNEL_SANDBOX=off on a single-developer machine',
    );
  }
  const MiB = 1024 * 1024;
  const cgroupParent = str('SANDBOX_CGROUP_PARENT');
  if (cgroupParent !== undefined && (cgroupParent.split('/').includes('..') || !/^[\w./@:-]+$/.test(cgroupParent))) {
    problems.push(
      `SANDBOX_CGROUP_PARENT=${JSON.stringify(cgroupParent)} is not a cgroup path; give it relative to the cgroup2 mount, e.g. system.slice/codeagent-sandboxes`,
    );
  }

  const logLevel = str('LOG_LEVEL') ?? 'info';
  if (!LOG_LEVELS.includes(logLevel)) {
    problems.push(`LOG_LEVEL=${JSON.stringify(logLevel)} is not one of ${LOG_LEVELS.join(', ')}`);
  }

  const logFormat = (str('LOG_FORMAT') ?? 'auto').toLowerCase() as LogFormat;
  if (!LOG_FORMATS.includes(logFormat)) {
    problems.push(
      `LOG_FORMAT=${JSON.stringify(logFormat)} is not one of ${LOG_FORMATS.join(', ')}; unset it for pretty lines on a terminal and JSON otherwise`,
    );
  }

  const backendUrls = urls('BACKEND_URL', `http://127.0.0.1:${backendPort}`);
  const backendInGateway = bool('BACKEND_IN_GATEWAY', false);
  if (backendInGateway && backendUrls.length > 1) {
    problems.push(
      `BACKEND_IN_GATEWAY runs the one backend of this machine inside the gateway, but BACKEND_URL lists ${backendUrls.length} instances; unset BACKEND_IN_GATEWAY to balance over them, or list one`,
    );
  }
  const clusterAdminUrls = urls('CLUSTER_ADMIN_URL', `http://127.0.0.1:${clusterAdminPort}`);
  const bridgeUrls = urls('BRIDGE_URL', `http://127.0.0.1:${bridgePort}`);
  // Without JUPYTERLAB_URL the gateway sends /jupyter/<workspace id>/ to the runtime, which runs
  // each workspace's JupyterLab; with it, to the shared developer server of `codeagent jupyterlab`.
  const sharedJupyterlab = str('JUPYTERLAB_URL') !== undefined;
  const runtimeUrlValue = url('RUNTIME_URL', `http://127.0.0.1:${runtimePort}`);
  const jupyterlabUrls = urls('JUPYTERLAB_URL', runtimeUrlValue);
  const labOriginsParsed = parseLabOrigins(str('LAB_ORIGIN'), str('PLATFORM_ORIGIN'));
  const labOrigins = labOriginsParsed !== undefined && 'problems' in labOriginsParsed ? undefined : labOriginsParsed;
  if (labOriginsParsed !== undefined && 'problems' in labOriginsParsed) problems.push(...labOriginsParsed.problems);
  if (labOriginsParsed !== undefined && sharedJupyterlab) {
    problems.push('LAB_ORIGIN gives each workspace’s JupyterLab a host of its own; the shared developer server of JUPYTERLAB_URL has none: unset one of them');
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
    embeddedDatabase:
      databaseUrl === undefined && generated
        ? { password: generated.EMBEDDED_DB_PASSWORD, superuserPassword: generated.EMBEDDED_DB_SUPERUSER_PASSWORD }
        : undefined,
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
    runtimeUrl: runtimeUrlValue,
    backendUrl: backendUrls[0]!,
    clusterAdminUrl: clusterAdminUrls[0]!,
    bridgeUrl: bridgeUrls[0]!,
    backendUrls,
    backendInGateway,
    clusterAdminUrls,
    bridgeUrls,
    gatewayMetricsPort: optionalPort('GATEWAY_METRICS_PORT'),
    workerMetricsPort: optionalPort('WORKER_METRICS_PORT'),
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
      url: bridgeAgentUrl(),
      user: str('CODEAGENT_BRIDGE_USER'),
      password: env.CODEAGENT_BRIDGE_PASSWORD === '' ? undefined : env.CODEAGENT_BRIDGE_PASSWORD,
      workdir: bridgeWorkdir,
      allowedHosts: list('CODEAGENT_BRIDGE_ALLOWED_HOSTS').map((h) => h.toLowerCase()),
    },
    jupyter: {
      url: str('JUPYTER_URL') === undefined ? undefined : url('JUPYTER_URL', ''),
      token: str('JUPYTER_TOKEN'),
      python: str('JUPYTER_PYTHON') ?? '/usr/bin/python3',
      cullIdleSeconds: int('KERNEL_CULL_IDLE_SECONDS', 3600, 0),
      poolSize: int('KERNEL_POOL_SIZE', 1, 0, 16),
      poolMax: int('KERNEL_POOL_MAX', 4, 0, 1000),
      poolIdleSeconds: int('KERNEL_POOL_IDLE_SECONDS', 600, 1, 7 * 24 * 3600),
    },
    sandbox: {
      enabled: sandboxEnabled,
      uidBase: int('SANDBOX_UID_BASE', 1_900_000_000, 65_536, 2_047_483_646),
      memoryBytes: int('SANDBOX_MEMORY_MB', 4096, 64, 1024 * 1024) * MiB,
      pidsMax: int('SANDBOX_PIDS_MAX', 512, 16, 1_000_000),
      cpus: decimal('SANDBOX_CPUS', 1, 0.05, 1024),
      kernelMemoryBytes: int('KERNEL_MEMORY_MB', 2048, 64, 1024 * 1024) * MiB,
      kernelPidsMax: int('KERNEL_PIDS_MAX', 256, 8, 1_000_000),
      diskBytes: int('SANDBOX_DISK_MB', 1024, 1, 1024 * 1024) * MiB,
      tmpBytes: int('SANDBOX_TMP_MB', 512, 1, 1024 * 1024) * MiB,
      maxServers: int('SANDBOX_MAX_SERVERS', 16, 1, 10_000),
      idleSeconds: int('JUPYTER_IDLE_TIMEOUT', 900, 1, 7 * 24 * 3600),
      filesMaxBytes: int('SANDBOX_FILES_MAX_BYTES', 128 * MiB, 1, 4 * 1024 * MiB),
      cgroupParent,
    },
    worker: {
      leaseSeconds: int('WORKER_LEASE_SECONDS', 30, 1, 3600),
      concurrency: int('WORKER_CONCURRENCY', 2, 1, 64),
      pollMs: int('WORKER_POLL_MS', 1000, 10, 60_000),
      runTimeoutSeconds: int('RUN_TIMEOUT_SECONDS', 3600, 1, 7 * 24 * 3600),
      // Decision 0234: one workspace's long runs never hold every worker's slots.
      maxRunningPerWorkspace: int('MAX_RUNNING_RUNS_PER_WORKSPACE', 1, 1, 10_000),
    },
    runLimits: {
      scheduleMinIntervalSeconds: int('SCHEDULE_MIN_INTERVAL_SECONDS', 60, 1, 366 * 24 * 3600),
      maxSchedulesPerWorkspace: int('MAX_SCHEDULES_PER_WORKSPACE', 50, 1, 1_000_000),
      maxQueuedRunsPerWorkspace: int('MAX_QUEUED_RUNS_PER_WORKSPACE', 100, 1, 1_000_000),
    },
    workspaceQuotaBytes: optionalInt('WORKSPACE_QUOTA_BYTES', 1),
    retention: {
      runDays: int('RUN_RETENTION_DAYS', 30, 0, 100 * 365),
      versionCount: int('VERSION_RETENTION_COUNT', 50, 0, 1_000_000),
      versionDays: int('VERSION_RETENTION_DAYS', 0, 0, 100 * 365),
    },
    maxUploadBytes: int('MAX_UPLOAD_BYTES', 10 * 1024 ** 3, 1),
    trustedProxies,
    gatewayAddresses,
    logLevel,
    logFormat,
    jupyterlab: {
      url: jupyterlabUrls[0]!,
      urls: jupyterlabUrls,
      shared: sharedJupyterlab,
      token: str('JUPYTERLAB_TOKEN') ?? derivedJupyterlabToken(internalServiceToken),
    },
    labOrigins,
  };

  if (problems.length > 0) throw new ConfigError(problems);
  return config;
}

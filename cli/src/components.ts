import type { Config } from '@codeagent/config';

export interface Component {
  description: string;
  /** The settings (environment variables) it reads besides COMMON_SETTINGS, shown by `codeagent <name> --help`. */
  settings: readonly string[];
  /** Started by `codeagent start`, in this order. */
  inStart: boolean;
  start(config: Config): Promise<unknown>;
}

/** Message a supervised component sends over its IPC channel once it serves. */
export const READY_MESSAGE = 'codeagent:ready';
/** Set in the environment of the components the supervisor starts (each leads its process group). */
export const SUPERVISED_ENV = 'CODEAGENT_SUPERVISED';

/** Read by every command. */
export const COMMON_SETTINGS = ['DATA_DIR', 'NODE_ENV', 'LOG_LEVEL', 'LOG_FORMAT'] as const;
export const STORAGE_SETTINGS = [
  'STORAGE_BACKEND',
  'LOCAL_STORAGE_BASE_DIR',
  'S3_ENDPOINT',
  'S3_REGION',
  'S3_ACCESS_KEY_ID',
  'S3_SECRET_ACCESS_KEY',
  'S3_FORCE_PATH_STYLE',
  'S3_BUCKET_*',
] as const;
const SANDBOX_SETTINGS = [
  'SANDBOX_MEMORY_MB',
  'SANDBOX_PIDS_MAX',
  'SANDBOX_CPUS',
  'KERNEL_MEMORY_MB',
  'KERNEL_PIDS_MAX',
  'SANDBOX_DISK_MB',
  'SANDBOX_TMP_MB',
  'SANDBOX_MAX_SERVERS',
  'JUPYTER_IDLE_TIMEOUT',
  'SANDBOX_UID_BASE',
  'SANDBOX_CGROUP_PARENT',
] as const;

/** Every component that can run alone (`codeagent <name>`), as containers run them. */
export const components = {
  backend: {
    description: 'public API and internal routes (127.0.0.1:BACKEND_PORT)',
    settings: [
      'COMPONENT_HOST',
      'BACKEND_PORT',
      'DATABASE_URL',
      ...STORAGE_SETTINGS,
      'INTERNAL_SERVICE_TOKEN',
      'JWT_SECRET',
      'JWT_TTL_SECONDS',
      'BOOTSTRAP_ADMIN_EMAIL',
      'BOOTSTRAP_ADMIN_PASSWORD',
      'RUNTIME_URL',
      'MAX_UPLOAD_BYTES',
      'SCHEDULE_MIN_INTERVAL_SECONDS',
      'MAX_SCHEDULES_PER_WORKSPACE',
      'MAX_QUEUED_RUNS_PER_WORKSPACE',
      'WORKSPACE_QUOTA_BYTES',
    ],
    inStart: true,
    start: async (config: Config) => (await import('@codeagent/backend')).startBackend(config),
  },
  runtime: {
    description: "kernel actions on real Jupyter kernels, and each workspace's JupyterLab behind /jupyter/{workspace_id}/ (127.0.0.1:RUNTIME_PORT)",
    settings: [
      'COMPONENT_HOST',
      'RUNTIME_PORT',
      'INTERNAL_SERVICE_TOKEN',
      'JUPYTERLAB_TOKEN',
      'KERNEL_SANDBOX',
      ...SANDBOX_SETTINGS,
      'JUPYTER_URL',
      'JUPYTER_TOKEN',
      'JUPYTER_PYTHON',
      'KERNEL_CULL_IDLE_SECONDS',
      'KERNEL_POOL_SIZE',
      'KERNEL_POOL_MAX',
      'KERNEL_POOL_IDLE_SECONDS',
    ],
    inStart: true,
    start: async (config: Config) => (await import('@codeagent/runtime')).startRuntime(config),
  },
  worker: {
    description: 'schedule worker: claims due runs and executes them on the runtime (no port)',
    settings: [
      'DATABASE_URL',
      ...STORAGE_SETTINGS,
      'INTERNAL_SERVICE_TOKEN',
      'BACKEND_URL',
      'RUNTIME_URL',
      'WORKER_METRICS_PORT',
      'WORKER_LEASE_SECONDS',
      'WORKER_CONCURRENCY',
      'WORKER_POLL_MS',
      'RUN_TIMEOUT_SECONDS',
      'SCHEDULE_MIN_INTERVAL_SECONDS',
      'MAX_QUEUED_RUNS_PER_WORKSPACE',
      'MAX_RUNNING_RUNS_PER_WORKSPACE',
      'WORKSPACE_QUOTA_BYTES',
      'RUN_RETENTION_DAYS',
      'VERSION_RETENTION_COUNT',
      'VERSION_RETENTION_DAYS',
      'SANDBOX_FILES_MAX_BYTES',
    ],
    inStart: true,
    start: async (config: Config) => (await import('@codeagent/worker')).startWorker(config),
  },
  'cluster-admin': {
    description: 'cluster records, audit, and the /mcp agent endpoint (127.0.0.1:CLUSTER_ADMIN_PORT)',
    settings: [
      'COMPONENT_HOST',
      'CLUSTER_ADMIN_PORT',
      'DATABASE_URL',
      'ADMIN_TOKENS',
      'SECRETS_KEY',
      'AGENT_TOKEN',
      'MCP_ALLOWED_ORIGINS',
      'OUTBOUND_ALLOWLIST',
      'OUTBOUND_MAX_REDIRECTS',
      'OUTBOUND_TIMEOUT_MS',
      'OUTBOUND_MAX_RESPONSE_BYTES',
      'OUTBOUND_ALLOW_LOOPBACK',
    ],
    inStart: true,
    start: async (config: Config) => (await import('@codeagent/cluster-admin')).startClusterAdmin(config),
  },
  bridge: {
    description: 'notebook bridge: cell edits through the local code agent (127.0.0.1:BRIDGE_PORT)',
    settings: [
      'COMPONENT_HOST',
      'BRIDGE_PORT',
      'JWT_SECRET',
      'CODEAGENT_BRIDGE_URL',
      'CODEAGENT_BRIDGE_USER',
      'CODEAGENT_BRIDGE_PASSWORD',
      'CODEAGENT_BRIDGE_WORKDIR',
      'CODEAGENT_BRIDGE_ALLOWED_HOSTS',
    ],
    inStart: true,
    start: async (config: Config) => (await import('@codeagent/bridge')).startBridge(config),
  },
  jupyterlab: {
    description:
      'single-user developer mode: one shared JupyterLab with the bridge extension (127.0.0.1:JUPYTERLAB_PORT; the gateway routes /jupyter/ there only when JUPYTERLAB_URL is set; needs `node extensions/build.mjs`)',
    // Not in `codeagent start`: it needs the built host and Debian's Jupyter packages (README).
    settings: ['JUPYTERLAB_PORT', 'JUPYTERLAB_TOKEN', 'INTERNAL_SERVICE_TOKEN', 'KERNEL_SANDBOX', ...SANDBOX_SETTINGS],
    inStart: false,
    start: async (config: Config) => (await import('./jupyterlab.js')).startJupyterlab(config),
  },
  gateway: {
    description: "the single ingress (HOST:PORT); with BACKEND_IN_GATEWAY=true the backend runs in its process too, reading the backend's settings",
    settings: [
      'HOST',
      'PORT',
      'COMPONENT_HOST',
      'BACKEND_URL',
      'CLUSTER_ADMIN_URL',
      'BRIDGE_URL',
      'RUNTIME_URL',
      'JUPYTERLAB_URL',
      'JUPYTERLAB_TOKEN',
      'INTERNAL_SERVICE_TOKEN',
      'GATEWAY_METRICS_PORT',
      'TRUSTED_PROXIES',
      'MAX_UPLOAD_BYTES',
      'BACKEND_IN_GATEWAY',
    ],
    inStart: true,
    start: async (config: Config) => {
      const { startGateway } = await import('@codeagent/gateway');
      if (!config.backendInGateway) return startGateway(config);
      // BACKEND_IN_GATEWAY (decision 0194): the backend in this process, on its own port for
      // the other components, and handed the gateway's API requests without a network hop.
      const backend = await (await import('@codeagent/backend')).startBackend(config, { signals: false });
      return startGateway(config, { backend: { handle: (req, res) => backend.routing(req, res), close: () => backend.close() } });
    },
  },
} satisfies Record<string, Component>;

export type ComponentName = keyof typeof components;

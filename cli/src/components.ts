import type { Config } from '@codeagent/config';

export interface Component {
  description: string;
  /** Started by `codeagent start`, in this order. */
  inStart: boolean;
  start(config: Config): Promise<unknown>;
}

/** Every component that can run alone (`codeagent <name>`), as containers run them. */
export const components = {
  backend: {
    description: 'public API and internal routes (127.0.0.1:BACKEND_PORT)',
    inStart: true,
    start: async (config: Config) => (await import('@codeagent/backend')).startBackend(config),
  },
  runtime: {
    description: 'kernel actions on real Jupyter kernels (127.0.0.1:RUNTIME_PORT)',
    inStart: true,
    start: async (config: Config) => (await import('@codeagent/runtime')).startRuntime(config),
  },
  worker: {
    description: 'schedule worker: claims due runs and executes them on the runtime (no port)',
    inStart: true,
    start: async (config: Config) => (await import('@codeagent/worker')).startWorker(config),
  },
  'cluster-admin': {
    description: 'cluster records, audit, and the /mcp agent endpoint (127.0.0.1:CLUSTER_ADMIN_PORT)',
    inStart: true,
    start: async (config: Config) => (await import('@codeagent/cluster-admin')).startClusterAdmin(config),
  },
  bridge: {
    description: 'notebook bridge: cell edits through the local code agent (127.0.0.1:BRIDGE_PORT)',
    inStart: true,
    start: async (config: Config) => (await import('@codeagent/bridge')).startBridge(config),
  },
  jupyterlab: {
    description: 'JupyterLab with the bridge extension (127.0.0.1:JUPYTERLAB_PORT, behind /jupyter/; needs `node extensions/build.mjs`)',
    // Not in `codeagent start`: it needs the built host and Debian's Jupyter packages (README).
    inStart: false,
    start: async (config: Config) => (await import('./jupyterlab.js')).startJupyterlab(config),
  },
  gateway: {
    description: 'the single ingress (HOST:PORT)',
    inStart: true,
    start: async (config: Config) => (await import('@codeagent/gateway')).startGateway(config),
  },
} satisfies Record<string, Component>;

export type ComponentName = keyof typeof components;

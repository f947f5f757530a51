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

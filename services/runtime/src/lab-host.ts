import { fileURLToPath } from 'node:url';
import type { LabHost } from './servers.js';

/** The JupyterLab host and the bridge extension of this checkout (`node extensions/build.mjs` builds them). */
export function defaultLabHost(): LabHost {
  return {
    hostDir: fileURLToPath(new URL('../../../extensions/lab-host/', import.meta.url)),
    extensionsDir: fileURLToPath(new URL('../../../extensions/jupyterlab-codeagent-bridge/labextension/', import.meta.url)),
  };
}

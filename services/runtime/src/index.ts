export { buildRuntimeApp } from './app.js';
export type { RuntimeAppOptions } from './app.js';
export { KernelService } from './kernels.js';
export type { ExecuteResult, KernelInfo, Notebook, NotebookCell, Output } from './kernels.js';
export { ManagedJupyterServer, externalJupyter, KernelUnavailableError, INSTALL_HINT } from './jupyter-server.js';
export { startRuntime } from './server.js';

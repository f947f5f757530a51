export { buildBackendApp } from './app.js';
export type { BackendAppOptions } from './app.js';
export { startBackend } from './server.js';
export type { StartBackendOptions } from './server.js';
export { ensureBootstrapAdmin } from './domain/users.js';

export { buildClusterAdminApp } from './app.js';
export type { ClusterAdminOptions } from './app.js';
export { startClusterAdmin } from './server.js';

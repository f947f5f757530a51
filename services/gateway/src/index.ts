export { buildGatewayApp } from './app.js';
export type { GatewayOptions, JupyterUpstream, Upstreams } from './app.js';
export { startGateway } from './server.js';

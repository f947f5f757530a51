export { buildGatewayApp } from './app.js';
export type { GatewayOptions, Upstreams } from './app.js';
export { startGateway } from './server.js';

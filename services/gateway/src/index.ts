export { buildGatewayApp, FORM_OVERHEAD_BYTES } from './app.js';
export type { Addresses, GatewayOptions, JupyterUpstream, Upstreams } from './app.js';
export { startGateway } from './server.js';
export { renderNginxConfig } from './nginx.js';
export type { NginxOptions } from './nginx.js';
export { ROUTES, UPSTREAMS } from './routes.js';
export type { Route, ProxyRoute, UpstreamName } from './routes.js';
export { UpstreamPool } from './upstream-pool.js';
export { APP_PATHS, defaultWebRoot } from './web-app.js';

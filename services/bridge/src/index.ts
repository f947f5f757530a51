export { buildBridgeApp, BRIDGE_VERSION } from './app.js';
export type { BridgeOptions } from './app.js';
export { startBridge } from './server.js';
export { resolveSettings } from './settings.js';
export { buildPrompt, extractCode, stripAnsi } from './prompts.js';

export { loadConfig, ConfigError, isProductionMode } from './settings.js';
export type { Config, LoadOptions, StorageBackend } from './settings.js';
export { loadOrCreateSecrets, SECRETS_FILE } from './secrets.js';
export type { GeneratedSecrets } from './secrets.js';

export { loadConfig, ConfigError, isProductionMode, LOG_FORMATS } from './settings.js';
export type { Config, LoadOptions, LogFormat, StorageBackend } from './settings.js';
export { loadOrCreateSecrets, SECRETS_FILE } from './secrets.js';
export type { GeneratedSecrets } from './secrets.js';
export { labOriginOf, labWorkspaceOfHost, parseLabOrigins, underLabsDomain } from './lab-origin.js';
export type { LabOrigins } from './lab-origin.js';

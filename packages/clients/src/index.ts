export { runtimeClient, putInternalObject } from './internal.js';
export type { RuntimeClient, RuntimeFile, RuntimeRunContext, RuntimeRunResult } from './internal.js';

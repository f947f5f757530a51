export { ScheduleWorker } from './worker.js';
export type { RunIO, NotebookRunner, WorkerOptions, Maintenance, WorkspaceFile, RunContext } from './worker.js';
export { executedNotebookPath, injectParameters, parseNotebook, firstError } from './notebook.js';
export type { Notebook, NotebookCell } from './notebook.js';
export { startWorker, platformRunIO } from './server.js';
export { runtimeClient, putInternalObject } from '@codeagent/clients';
export { applyRetention } from './retention.js';
export type { RetentionSettings, RetentionOptions, RetentionResult } from './retention.js';

export { validateSchedule, smallestGapSeconds, isTimeZone, nextRunAfter } from './cron.js';
export { parameterNameProblem } from './parameters.js';
export { MAX_NOTEBOOK_BYTES, notebookSizeProblem } from './limits.js';
export {
  enqueueRun,
  enqueueDueSchedules,
  claimRuns,
  renewLease,
  runsStillHeld,
  completeRun,
  cancelRun,
  cancelQueuedRunsOfSchedule,
  recordEndedRunResults,
  failExpiredRuns,
  QueueFullError,
  RUNS_CHANNEL,
  notifyWorkers,
  nextDeadlines,
  schedulesDueSoon,
  DUE_SOON_WORKSPACES,
} from './queue.js';
export type { EnqueueInput, Completion, ScheduleTickOptions, ScheduleTick } from './queue.js';
export { expiredRuns, deleteFinishedRuns } from './retention.js';
export type { ExpiredRun } from './retention.js';

export { validateSchedule, isTimeZone, nextRunAfter } from './cron.js';
export { enqueueRun, enqueueDueSchedules, claimRuns, renewLease, completeRun, failExpiredRuns } from './queue.js';
export type { EnqueueInput, Completion } from './queue.js';

import { Cron } from 'croner';

/**
 * How many upcoming fire times the minimum-interval check looks at: many in UTC (the wall-clock
 * pattern; cheap), fewer in the schedule's zone (a daylight-saving jump can bring two fires
 * closer; croner pays for time-zone conversions, ~0.5 ms a fire, on the request's event loop).
 */
const WALL_CLOCK_SAMPLE = 128;
const ZONE_SAMPLE = 16;

/**
 * Checks a schedule's cron (5 fields, or 6 with leading seconds) and IANA zone; returns problems
 * by field. With `minIntervalSeconds` (the check of new timing), a cron that fires more often than
 * that, or never, is a problem too.
 */
export function validateSchedule(cron: string, timezone: string, minIntervalSeconds?: number): Record<string, string> {
  const problems: Record<string, string> = {};
  const fields = cron.trim().split(/\s+/);
  if (fields.length !== 5 && fields.length !== 6) {
    problems.cron = `has ${fields.length} fields; use 5 (minute hour day month weekday) or 6 with leading seconds`;
  }
  if (!isTimeZone(timezone)) problems.timezone = `${JSON.stringify(timezone)} is not an IANA time zone (e.g. UTC, Europe/Berlin)`;
  if (!problems.cron) {
    try {
      new Cron(cron, { paused: true, timezone: problems.timezone ? 'UTC' : timezone });
    } catch (err) {
      problems.cron = (err as Error).message.replace(/^CronPattern: /, '');
    }
  }
  if (minIntervalSeconds !== undefined && !problems.cron && !problems.timezone && nextRunAfter(cron, timezone, new Date()) === null) {
    problems.cron = NEVER_FIRES;
  }
  // Five fields fire on whole minutes: never closer than 60 s, whatever the zone does.
  const needsSample = minIntervalSeconds !== undefined && (fields.length === 6 || minIntervalSeconds > 60);
  if (!problems.cron && !problems.timezone && needsSample) {
    const wall = smallestGapSeconds(cron, 'UTC', new Date(), WALL_CLOCK_SAMPLE);
    const zoned = timezone === 'UTC' ? undefined : smallestGapSeconds(cron, timezone, new Date(), ZONE_SAMPLE);
    const gap = wall === undefined ? zoned : zoned === undefined ? wall : Math.min(wall, zoned);
    if (gap !== undefined && gap < minIntervalSeconds) {
      problems.cron = `fires ${gap} s apart; SCHEDULE_MIN_INTERVAL_SECONDS allows no less than ${minIntervalSeconds} s between runs`;
    }
  }
  return problems;
}

/**
 * The smallest gap (seconds) between consecutive fire times among the next `count`, computed in
 * `timezone`; undefined when it fires fewer than twice. A sample, not a proof: the worker also
 * never schedules a tick sooner than the minimum after the previous one (`enqueueDueSchedules`).
 */
export function smallestGapSeconds(cron: string, timezone: string, from = new Date(), count = ZONE_SAMPLE): number | undefined {
  // A fixed offset spares croner its Intl.DateTimeFormat per step: UTC is ~100 times cheaper so.
  const fires = withoutDate(() => new Cron(cron, { paused: true, ...(timezone === 'UTC' ? { utcOffset: 0 } : { timezone }) }).nextRuns(count, from), []);
  let smallest: number | undefined;
  for (let i = 1; i < fires.length; i++) {
    const gap = (fires[i]!.getTime() - fires[i - 1]!.getTime()) / 1000;
    if (smallest === undefined || gap < smallest) smallest = gap;
  }
  return smallest;
}

export function isTimeZone(zone: string): boolean {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: zone });
    return zone.length > 0;
  } catch {
    return false;
  }
}

/** The first time strictly after `after` at which the schedule fires, or null if never again. */
export function nextRunAfter(cron: string, timezone: string, after: Date): Date | null {
  return withoutDate(() => new Cron(cron, { paused: true, timezone }).nextRun(after), null);
}

/** The problem named for a cron that no date matches (a day its months do not have). */
export const NEVER_FIRES = 'no date matches it (a day of the month that its months do not have, e.g. 31 in February or April): it would never run';

/**
 * Croner looks for a cron's next date month by month, one call deeper for each, up to the year
 * 9999: when no date matches and the cron names several months ("0 0 31 4,6,9,11 *"), the search
 * outgrows the stack before it ends. That is a cron that never fires, not a fault of the caller
 * (the request's 500, or a worker's tick that fails for every schedule).
 */
function withoutDate<T>(search: () => T, never: T): T {
  try {
    return search();
  } catch (err) {
    if (err instanceof RangeError && /call stack/i.test(err.message)) return never;
    throw err;
  }
}

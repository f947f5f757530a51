import { Cron } from 'croner';

/** Checks a schedule's cron (5 fields, or 6 with leading seconds) and IANA zone; returns problems by field. */
export function validateSchedule(cron: string, timezone: string): Record<string, string> {
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
  return problems;
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
  return new Cron(cron, { paused: true, timezone }).nextRun(after);
}

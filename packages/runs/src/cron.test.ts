import { describe, expect, it } from 'vitest';
import { nextRunAfter, smallestGapSeconds, validateSchedule } from './cron.js';

describe('schedule validation', () => {
  it('accepts 5 fields, and 6 with leading seconds, in IANA zones', () => {
    expect(validateSchedule('*/5 * * * *', 'UTC')).toEqual({});
    expect(validateSchedule('*/10 * * * * *', 'Europe/Berlin')).toEqual({});
    expect(validateSchedule('0 9 * * MON-FRI', 'America/New_York')).toEqual({});
  });
  it('rejects other field counts, bad values and unknown zones', () => {
    expect(validateSchedule('* * * *', 'UTC')).toHaveProperty('cron');
    expect(validateSchedule('0 0 0 * * * 2030', 'UTC')).toHaveProperty('cron');
    expect(validateSchedule('61 * * * *', 'UTC').cron).toMatch(/minute/);
    expect(validateSchedule('* * * * *', 'Mars/Base')).toHaveProperty('timezone');
    expect(validateSchedule('* * * * *', '')).toHaveProperty('timezone');
  });
  it('computes the next time in the schedule zone', () => {
    expect(nextRunAfter('0 0 * * *', 'America/New_York', new Date('2026-01-01T00:00:00Z'))!.toISOString()).toBe('2026-01-01T05:00:00.000Z');
    expect(nextRunAfter('*/15 * * * * *', 'UTC', new Date('2026-01-01T00:00:01Z'))!.toISOString()).toBe('2026-01-01T00:00:15.000Z');
  });
});

describe('minimum interval between fires (SCHEDULE_MIN_INTERVAL_SECONDS)', () => {
  it('refuses crons that fire more often, naming the setting', () => {
    for (const cron of ['* * * * * *', '*/30 * * * * *', '0,59 * * * * *', '0,30 0 0 * * *']) {
      const problems = validateSchedule(cron, 'UTC', 60);
      expect(problems.cron, cron).toMatch(/SCHEDULE_MIN_INTERVAL_SECONDS/);
    }
    expect(validateSchedule('* * * * *', 'Europe/Berlin', 300).cron).toMatch(/fires 60 s apart.*300/);
    expect(validateSchedule('0 0,1 * * *', 'UTC', 7200).cron).toMatch(/3600 s apart/);
  });
  it('accepts crons that fire exactly as often or less', () => {
    for (const cron of ['* * * * *', '0 * * * * *', '30 */1 * * * *', '0 9 * * MON-FRI', '0 0 29 2 *']) {
      expect(validateSchedule(cron, 'America/New_York', 60), cron).toEqual({});
    }
    expect(validateSchedule('*/5 * * * *', 'UTC', 300)).toEqual({});
    // without a limit, anything valid goes
    expect(validateSchedule('* * * * * *', 'UTC')).toEqual({});
  });
  it('measures gaps in the schedule zone, where a daylight-saving jump brings fires closer', () => {
    // 01:59 and 03:00 wall time are 61 minutes apart, but one real minute on the night
    // Berlin skips 02:00-03:00 (2026-03-29).
    const before = new Date('2026-03-28T00:00:00Z');
    expect(smallestGapSeconds('0,59 1,3 * * *', 'UTC', before)).toBe(59 * 60);
    expect(smallestGapSeconds('0,59 1,3 * * *', 'Europe/Berlin', before)).toBe(60);
    expect(smallestGapSeconds('0 0 1 1 *', 'UTC', before)).toBe(365 * 86400);
  });
});

import { describe, expect, it } from 'vitest';
import { NEVER_FIRES, nextRunAfter, smallestGapSeconds, validateSchedule } from './cron.js';

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

describe('a cron that no date matches', () => {
  // Croner searches month by month up to 9999: with several months and no date in them the
  // search outgrew the stack (a RangeError: the request's 500, a worker tick failing for all).
  const never = ['0 0 31 2 *', '0 0 30 2 *', '0 0 31 4,6,9,11 *', '0 0 0 31 4,6,9,11 *', '* * 31 2 *', '0 0 31 2 +1'];
  it('is refused as new timing, naming why', () => {
    for (const cron of never) {
      for (const zone of ['UTC', 'Asia/Tokyo']) expect(validateSchedule(cron, zone, 60), `${cron} ${zone}`).toEqual({ cron: NEVER_FIRES });
    }
    // Rare is not never: leap days, and a leap day that is a Monday (2044).
    expect(validateSchedule('0 0 29 2 *', 'UTC', 60)).toEqual({});
    expect(validateSchedule('0 0 29 2 +1', 'UTC', 60)).toEqual({});
    expect(validateSchedule('0 0 31 4,6,9,12 *', 'UTC', 60)).toEqual({});
  });
  it('stays acceptable as stored timing (a rename or a switch-off of an old schedule)', () => {
    for (const cron of never) expect(validateSchedule(cron, 'UTC'), cron).toEqual({});
  });
  it('has no next time and no gap, instead of an error', () => {
    for (const cron of never) {
      expect(nextRunAfter(cron, 'Europe/Berlin', new Date('2026-04-01T00:00:00Z')), cron).toBeNull();
      expect(smallestGapSeconds(cron, 'UTC'), cron).toBeUndefined();
    }
    expect(nextRunAfter('0 0 29 2 +1', 'UTC', new Date('2026-01-01T00:00:00Z'))!.toISOString()).toBe('2044-02-29T00:00:00.000Z');
  });
});

import { describe, expect, it } from 'vitest';
import { nextRunAfter, validateSchedule } from './cron.js';

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

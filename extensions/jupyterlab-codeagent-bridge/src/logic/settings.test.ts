import { describe, expect, it } from 'vitest';
import { explicitSettings, SETTING_DEFAULTS, timeoutSeconds } from './settings';

describe('explicitSettings (only what the user set is sent)', () => {
  it('is empty when the user set nothing, so the server environment applies', () => {
    expect(explicitSettings({})).toEqual({});
    expect(explicitSettings(null)).toEqual({});
    expect(explicitSettings(undefined)).toEqual({});
  });
  it('keeps explicitly set values that differ from their defaults', () => {
    expect(explicitSettings({ codeagentModel: 'gpt-x', codeagentServerUser: 'me', codeagentServerPassword: 'pw', requestTimeoutSeconds: 30 })).toEqual({
      codeagentModel: 'gpt-x',
      codeagentServerUser: 'me',
      codeagentServerPassword: 'pw',
      requestTimeoutSeconds: 30,
    });
  });
  it('drops values equal to their defaults: the Settings Editor saves every field it shows', () => {
    // What the Settings Editor writes after the user changed only the time-out.
    expect(explicitSettings({ ...SETTING_DEFAULTS, requestTimeoutSeconds: 45 })).toEqual({ requestTimeoutSeconds: 45 });
    expect(explicitSettings({ ...SETTING_DEFAULTS })).toEqual({});
  });
  it('drops unknown keys, wrong types and out-of-range time-outs', () => {
    expect(explicitSettings({ codeagentServerUrl: 42, other: 'x', requestTimeoutSeconds: 4, codeagentProvider: 'p' })).toEqual({ codeagentProvider: 'p' });
    expect(explicitSettings({ requestTimeoutSeconds: 601 })).toEqual({});
    expect(explicitSettings({ requestTimeoutSeconds: 7.5 })).toEqual({});
    expect(explicitSettings({ requestTimeoutSeconds: 600 })).toEqual({ requestTimeoutSeconds: 600 });
  });
});

describe('timeoutSeconds', () => {
  it('uses the composite value, the default when missing, clamped to 5–600', () => {
    expect(timeoutSeconds({ requestTimeoutSeconds: 30 })).toBe(30);
    expect(timeoutSeconds(undefined)).toBe(SETTING_DEFAULTS.requestTimeoutSeconds);
    expect(timeoutSeconds({ requestTimeoutSeconds: 1 })).toBe(5);
    expect(timeoutSeconds({ requestTimeoutSeconds: 10_000 })).toBe(600);
    expect(timeoutSeconds({ requestTimeoutSeconds: 'x' })).toBe(120);
  });
});

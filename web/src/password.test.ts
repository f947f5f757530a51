import { describe, expect, it } from 'vitest';
import { checkNewPassword } from './password';

describe('the account page checks a new password before sending it', () => {
  it('names the first thing wrong', () => {
    expect(checkNewPassword('', 'a-new-password', 'a-new-password')).toMatch(/current password/);
    expect(checkNewPassword('old-password', 'seven77', 'seven77')).toMatch(/at least 8 characters/);
    expect(checkNewPassword('old-password', 'a-new-password', 'a-new-passw0rd')).toMatch(/differ/);
    expect(checkNewPassword('old-password', 'old-password', 'old-password')).toMatch(/the one you have now/);
  });

  it('lets a good one through (the server judges the current password)', () => {
    expect(checkNewPassword('old-password', 'eight888', 'eight888')).toBeNull();
    expect(checkNewPassword('x', 'a-new-password', 'a-new-password')).toBeNull();
  });
});

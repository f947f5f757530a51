/** The server's rule for a password (routes/schemas.ts `Password`): said before sending. */
export const MIN_PASSWORD = 8;

/**
 * What the form's fields hold, checked before sending: a sentence for the first thing wrong, or
 * null. The server checks again (and is the only judge of the current password).
 */
export function checkNewPassword(current: string, next: string, repeat: string): string | null {
  if (current === '') return 'Enter your current password.';
  if (next.length < MIN_PASSWORD) return `The new password needs at least ${MIN_PASSWORD} characters.`;
  if (next !== repeat) return 'The two new passwords differ: type the same one twice.';
  if (next === current) return 'The new password is the one you have now: choose another.';
  return null;
}

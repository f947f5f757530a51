import { describe, expect, it } from 'vitest';
import { withoutCredentials } from './mcp.js';

// What a cluster's answer may echo of the credential it was sent: hidden in the forms an echo
// naturally writes it (decision 0250; the hostile review of 2026-11-29 for the encoded forms).
describe('withoutCredentials', () => {
  const auth = { type: 'basic', username: 'ops', password: 'p"a\\ss/wörd???1' };
  const basic = Buffer.from(`${auth.username}:${auth.password}`).toString('base64');

  it('hides the password and the header value as they are, inside JSON strings, with escaped slashes, and percent-encoded', () => {
    const echoes = [
      auth.password,
      basic,
      JSON.stringify({ password: auth.password }),
      JSON.stringify({ authorization: `Basic ${basic}` }),
      JSON.stringify({ authorization: `Basic ${basic}` }).replaceAll('/', '\\/'),
      JSON.stringify({ password: auth.password }).replaceAll('/', '\\/'),
      `https://cluster.example/echo?pw=${encodeURIComponent(auth.password)}&auth=${encodeURIComponent(basic)}`,
    ];
    for (const echo of echoes) {
      const hidden = withoutCredentials(echo, auth);
      expect(hidden, echo).toContain('***');
      for (const form of [auth.password, basic, JSON.stringify(auth.password).slice(1, -1), encodeURIComponent(auth.password), encodeURIComponent(basic)]) {
        expect(hidden, echo).not.toContain(form);
      }
      expect(hidden).not.toMatch(/wörd|w%C3%B6rd|w\\u00f6rd/);
    }
    expect(basic).toMatch(/\//);
  });

  it('leaves answers without the credential alone, and clusters without a password', () => {
    expect(withoutCredentials('{"ok":true}', auth)).toBe('{"ok":true}');
    expect(withoutCredentials(auth.password, { type: 'simple', username: 'ops' })).toBe(auth.password);
  });
});

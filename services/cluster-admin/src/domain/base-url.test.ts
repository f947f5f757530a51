import { describe, expect, it } from 'vitest';
import { baseUrlProblem, isSecretQueryName, redactBaseUrl, sameOrigin } from './base-url.js';

describe('cluster base_url (docs/contract/spec.md §8.2)', () => {
  it.each([
    'https://ops:pw@rm.example.com',
    'https://ops@rm.example.com',
    'https://:pw@rm.example.com',
    'http://ops:pw@10.0.0.1:8088/ws',
    'https://rm.example.com/?token=abc',
    'https://rm.example.com/?TOKEN=abc',
    'https://rm.example.com/?access_token=abc',
    'https://rm.example.com/?accessToken=abc',
    'https://rm.example.com/?password=x',
    'https://rm.example.com/?pass=x',
    'https://rm.example.com/?Pwd=x',
    'https://rm.example.com/?secret=x',
    'https://rm.example.com/?client_secret=x',
    'https://rm.example.com/?key=x',
    'https://rm.example.com/?api_key=x',
    'https://rm.example.com/?apiKey=x',
    'https://rm.example.com/?APIKEY=x',
    'https://rm.example.com/?api-key=x',
    'https://rm.example.com/?auth=x',
    'https://rm.example.com/?signature=x',
    'https://rm.example.com/?X-Amz-Signature=x&X-Amz-Credential=y',
    'https://rm.example.com/?sig=x',
    'https://rm.example.com/?credential=x',
    'https://rm.example.com/?credentials=x',
    'https://rm.example.com/?delegation=x',
    'https://rm.example.com/?hdfs.delegation.token=x',
    'https://rm.example.com/?x-auth-token=x',
    'https://rm.example.com/?jwt=x',
    'https://rm.example.com/?a=1&sessionid=x',
    'https://rm.example.com/?acc%65ss_token=x',
    'https://rm.example.com/path#token=abc',
    'ftp://rm.example.com/',
    'not a url',
  ])('refuses %s', (url) => {
    expect(baseUrlProblem(url)).toBeDefined();
  });

  it('never repeats the secret in the reason', () => {
    for (const url of ['https://ops:hunter2@h.example', 'https://h.example/?token=hunter2']) expect(baseUrlProblem(url)).not.toContain('hunter2');
  });

  it.each([
    'https://rm.example.com:8088',
    'http://rm.example.com/gateway/yarn/',
    'https://rm.example.com/?tenant=a&region=eu',
    'https://rm.example.com/?keyspace=a',
    'https://rm.example.com/?monkey=1',
    'https://rm.example.com/?author=me',
    'https://rm.example.com/?user.name=ops',
    'https://rm.example.com/?doas=ops',
  ])('accepts %s', (url) => {
    expect(baseUrlProblem(url)).toBeUndefined();
  });

  it('names as compared: camelCase, dashes and dots split into words', () => {
    expect(isSecretQueryName('refreshToken')).toBe(true);
    expect(isSecretQueryName('X-Goog-Signature')).toBe(true);
    expect(isSecretQueryName('db.password')).toBe(true);
    expect(isSecretQueryName('tokenizer')).toBe(false);
    expect(isSecretQueryName('passport')).toBe(false);
  });

  it('redacts user info and secret query values of records stored before the rule', () => {
    expect(redactBaseUrl('https://ops:pw@h.example/x?token=abc&a=1')).toBe('https://***@h.example/x?token=***&a=1');
    expect(redactBaseUrl('https://h.example/x?a=1')).toBe('https://h.example/x?a=1');
  });

  it('compares origins: scheme, host and port', () => {
    expect(sameOrigin('https://h.example/a', 'https://H.example:443/b?x=1')).toBe(true);
    expect(sameOrigin('https://h.example', 'http://h.example')).toBe(false);
    expect(sameOrigin('https://h.example', 'https://h.example:8443')).toBe(false);
    expect(sameOrigin('https://h.example', 'https://evil.example')).toBe(false);
  });
});

import type { IncomingHttpHeaders } from 'node:http';
import { describe, expect, it } from 'vitest';
import {
  SESSION_COOKIE,
  isCrossSiteBrowserRequest,
  isSameOrigin,
  readCookie,
  refusedCrossSite,
  requestCredential,
  sessionCookieOptions,
  withoutCookie,
} from './session-cookie.js';

const HOST = 'platform.example:8080';
const basic = (password: string) => `Basic ${Buffer.from(`anyone:${password}`).toString('base64')}`;

describe('the session cookie', () => {
  it('is named codeagent_session and set HttpOnly, SameSite=Lax, for every path', () => {
    expect(SESSION_COOKIE).toBe('codeagent_session');
    expect(sessionCookieOptions(false)).toEqual({ httpOnly: true, sameSite: 'lax', path: '/', secure: false });
    expect(sessionCookieOptions(true).secure).toBe(true);
  });

  it('is read from the first occurrence, percent-decoded, and kept raw when it cannot be decoded', () => {
    expect(readCookie(undefined, SESSION_COOKIE)).toBe('');
    expect(readCookie('a=1; codeagent_session=tok; codeagent_session=later', SESSION_COOKIE)).toBe('tok');
    expect(readCookie('codeagent_session=a%2Eb', SESSION_COOKIE)).toBe('a.b');
    expect(readCookie('codeagent_session=%E0%A4%A', SESSION_COOKIE)).toBe('%E0%A4%A');
    expect(readCookie('xcodeagent_session=tok; flag', SESSION_COOKIE)).toBe('');
  });

  it('is removed from a Cookie header, leaving the others', () => {
    expect(withoutCookie('_xsrf=abc; codeagent_session=t; other=1', SESSION_COOKIE)).toBe('_xsrf=abc; other=1');
    expect(withoutCookie('codeagent_session=t', SESSION_COOKIE)).toBeUndefined();
    expect(withoutCookie(undefined, SESSION_COOKIE)).toBeUndefined();
  });
});

describe('requestCredential', () => {
  it('takes Bearer first, then Basic where allowed, then the cookie', () => {
    const cookie = `${SESSION_COOKIE}=from-cookie`;
    expect(requestCredential({ authorization: 'Bearer b', cookie })).toEqual({ token: 'b', source: 'bearer' });
    expect(requestCredential({ authorization: basic('p'), cookie }, { basic: true })).toEqual({ token: 'p', source: 'basic' });
    expect(requestCredential({ authorization: basic('p'), cookie })).toEqual({ token: 'from-cookie', source: 'cookie' });
    expect(requestCredential({ cookie })).toEqual({ token: 'from-cookie', source: 'cookie' });
  });

  it('finds none without a token (a malformed Authorization header does not count)', () => {
    expect(requestCredential({})).toBeUndefined();
    expect(requestCredential({ authorization: 'bearer x', cookie: 'other=1' })).toBeUndefined();
    expect(requestCredential({ authorization: basic('p') })).toBeUndefined();
    expect(requestCredential({ cookie: `${SESSION_COOKIE}=` })).toBeUndefined();
  });
});

describe('same origin', () => {
  it('believes Sec-Fetch-Site first, then compares Origin with the addressed host', () => {
    expect(isSameOrigin({ 'sec-fetch-site': 'same-origin' }, HOST)).toBe(true);
    expect(isSameOrigin({ 'sec-fetch-site': 'none' }, HOST)).toBe(true);
    expect(isSameOrigin({ 'sec-fetch-site': 'same-site', origin: `http://${HOST}` }, HOST)).toBe(false);
    expect(isSameOrigin({ origin: `https://${HOST}` }, HOST)).toBe(true);
    expect(isSameOrigin({ origin: 'http://evil.example' }, HOST)).toBe(false);
    expect(isSameOrigin({ origin: 'null' }, HOST)).toBe(false);
    expect(isSameOrigin({ origin: `http://${HOST}` }, undefined)).toBe(false);
  });

  it('treats a request with neither header as not same-origin, but not as a cross-site browser', () => {
    expect(isSameOrigin({}, HOST)).toBe(false);
    expect(isCrossSiteBrowserRequest({}, HOST)).toBe(false);
    expect(isCrossSiteBrowserRequest({ 'sec-fetch-site': 'cross-site' }, HOST)).toBe(true);
    expect(isCrossSiteBrowserRequest({ origin: 'http://evil.example' }, HOST)).toBe(true);
    expect(isCrossSiteBrowserRequest({ origin: `http://${HOST}` }, HOST)).toBe(false);
  });
});

describe('refusedCrossSite (docs/contract/spec.md §4.1)', () => {
  const evil: IncomingHttpHeaders = { origin: 'http://evil.example' };
  const ours: IncomingHttpHeaders = { origin: `http://${HOST}` };

  it('never refuses a Bearer token, whatever the origin', () => {
    for (const method of ['GET', 'POST', 'DELETE']) expect(refusedCrossSite('bearer', method, { ...evil, 'sec-fetch-site': 'cross-site' }, HOST)).toBe(false);
  });

  it('refuses a cookie-only write from another origin or from a client that names none', () => {
    for (const method of ['POST', 'PUT', 'PATCH', 'DELETE']) {
      expect(refusedCrossSite('cookie', method, evil, HOST)).toBe(true);
      expect(refusedCrossSite('cookie', method, {}, HOST)).toBe(true);
      expect(refusedCrossSite('cookie', method, ours, HOST)).toBe(false);
    }
  });

  it('lets cookie-only reads through from anywhere, but not a websocket upgrade from another origin', () => {
    for (const method of ['GET', 'HEAD', 'OPTIONS']) expect(refusedCrossSite('cookie', method, evil, HOST)).toBe(false);
    expect(refusedCrossSite('cookie', 'GET', { ...evil, upgrade: 'WebSocket' }, HOST)).toBe(true);
    expect(refusedCrossSite('cookie', 'GET', { ...ours, upgrade: 'websocket' }, HOST)).toBe(false);
  });

  it('refuses Basic credentials for every method when a browser says it is cross-site, and lets mounts (no headers) through', () => {
    expect(refusedCrossSite('basic', 'GET', { 'sec-fetch-site': 'cross-site' }, HOST)).toBe(true);
    expect(refusedCrossSite('basic', 'PROPFIND', evil, HOST)).toBe(true);
    expect(refusedCrossSite('basic', 'PUT', {}, HOST)).toBe(false);
    expect(refusedCrossSite('basic', 'PUT', ours, HOST)).toBe(false);
  });
});

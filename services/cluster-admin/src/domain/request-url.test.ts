import { describe, expect, it } from 'vitest';
import { RequestRefusedError, clusterRequestUrl } from './request-url.js';

const BASE = 'https://rm.example.com:8088/gateway/yarn';

/** Paths that must never leave `/gateway/yarn/` nor smuggle a query (docs/contract/spec.md §8.4). */
const REFUSED_PATHS: string[] = [
  '../../x',
  '..',
  '/..',
  '../',
  'ws/../../x',
  'ws/v1/../../../admin',
  './x',
  'a/./b',
  '%2e%2e/x',
  '%2E%2E%2Fx',
  '%2e%2e%2f%2e%2e%2fx',
  '..%2fx',
  '..%2F..%2Fadmin',
  '.%2e/x',
  '%2e./x',
  '%252e%252e/x',
  '%25252e%25252e/x',
  '%2e',
  '..;/x',
  '..;jsessionid=1/x',
  '%2e%2e;/x',
  '.. /x',
  '..\\x',
  '..%5cx',
  '..%5Cx',
  'ws\\..\\..\\x',
  '\\\\evil.example\\x',
  'http://evil.example/x',
  'https://evil.example',
  'HTTP://evil.example/',
  'javascript:alert(1)',
  'file:///etc/passwd',
  '//evil.example/x',
  '///evil.example/x',
  'ws//v1',
  'x?user.name=root',
  'x#frag',
  'x%3fuser.name=root',
  'x%3Fa=b',
  'x%23frag',
  'x%253fuser.name=root',
  '.\n./x',
  '..\t/x',
  'x\r\nHost: evil.example',
  'x%0d%0aHost:%20evil.example',
  'x%00y',
  '%2f%2fevil.example/x',
];

describe('cluster_request paths (docs/contract/spec.md §8.4)', () => {
  it.each(REFUSED_PATHS)('refuses %j', (path) => {
    expect(() => clusterRequestUrl(BASE, path, undefined)).toThrow(RequestRefusedError);
  });

  it.each([
    ['ws/v1/cluster/info', '/gateway/yarn/ws/v1/cluster/info'],
    ['/ws/v1/cluster/info', '/gateway/yarn/ws/v1/cluster/info'],
    ['', '/gateway/yarn/'],
    ['/', '/gateway/yarn/'],
    ['ws/v1/', '/gateway/yarn/ws/v1/'],
    ['...', '/gateway/yarn/...'],
    ['a..b/.hidden', '/gateway/yarn/a..b/.hidden'],
    ['files/50%25 off.csv', '/gateway/yarn/files/50%25%20off.csv'],
    ['webhdfs/v1/user/a b', '/gateway/yarn/webhdfs/v1/user/a%20b'],
    ['apps/application_1;v=2', '/gateway/yarn/apps/application_1;v=2'],
  ])('keeps %j under the base path as %s', (path, pathname) => {
    const url = clusterRequestUrl(BASE, path, undefined);
    expect(url.origin).toBe('https://rm.example.com:8088');
    expect(url.pathname).toBe(pathname);
  });

  it('works the same with a trailing slash on the base URL and with a root base URL', () => {
    expect(clusterRequestUrl(`${BASE}/`, 'x', undefined).pathname).toBe('/gateway/yarn/x');
    expect(clusterRequestUrl('http://h.example', 'x', undefined).toString()).toBe('http://h.example/x');
    expect(() => clusterRequestUrl('http://h.example', '../x', undefined)).toThrow(RequestRefusedError);
  });

  it('adds query parameters encoded, and refuses overriding those the record fixes', () => {
    const url = clusterRequestUrl(`${BASE}?tenant=a`, 'apps', { state: 'RUNNING&x=1', 'a b': 'c' });
    expect(url.searchParams.get('tenant')).toBe('a');
    expect(url.searchParams.get('state')).toBe('RUNNING&x=1');
    expect(url.searchParams.get('x')).toBeNull();
    expect(url.search).toBe('?tenant=a&state=RUNNING%26x%3D1&a+b=c');
    expect(() => clusterRequestUrl(`${BASE}?tenant=a`, 'apps', { tenant: 'b' })).toThrow(/tenant is set by the cluster record/);
    expect(() => clusterRequestUrl(BASE, 'apps', { 'user.name': 'root' }, ['user.name'])).toThrow(/user\.name/);
  });

  it('bounds the decoding of nested escapes', () => {
    let deep = '..';
    for (let i = 0; i < 12; i++) deep = deep.replace(/%/g, '%25').replace(/\./g, '%2e');
    expect(() => clusterRequestUrl(BASE, `${deep}/x`, undefined)).toThrow(RequestRefusedError);
  });
});

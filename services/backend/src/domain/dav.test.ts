import { describe, expect, it } from 'vitest';
import { InvalidPathError } from '@codeagent/storage';
import { davHref, isWithin, multistatus, parseDavPath, parseDestination } from './dav.js';

const WS = '6f1c1d8e-0000-4000-8000-000000000001';

describe('parseDavPath', () => {
  it.each([
    [`/api/v1/dav/${WS}`, ''],
    [`/api/v1/dav/${WS}/`, ''],
    [`/api/v1/dav/${WS}/a.txt`, 'a.txt'],
    [`/api/v1/dav/${WS}/folder/`, 'folder'],
    [`/api/v1/dav/${WS}/a%20b/c%26d.txt`, 'a b/c&d.txt'],
    [`/api/v1/dav/${WS}/%C3%A9t%C3%A9.csv`, 'été.csv'],
    [`/api/v1/dav/${WS}/%252e%252e`, '%2e%2e'],
  ])('%s → %j', (url, path) => {
    expect(parseDavPath(url)).toEqual({ workspace: WS, path });
  });

  it.each(['a/../b', 'a/%2e%2e/b', '%2E', 'a/./b', 'a%2Fb', '..%2fb', 'a%5Cb', 'a\\b', 'bad%zz', 'a%00b', 'a//b', '%2F'])('refuses %s', (rest) => {
    expect(() => parseDavPath(`/api/v1/dav/${WS}/${rest}`)).toThrow(InvalidPathError);
  });

  it('is not concerned with other paths', () => {
    expect(parseDavPath('/api/v1/data-resources/x')).toBeUndefined();
  });
});

describe('parseDestination', () => {
  const host = '127.0.0.1:8080';
  it('takes an absolute path or a URL of this host', () => {
    expect(parseDestination(`/api/v1/dav/${WS}/b.txt`, host)).toEqual({ workspace: WS, path: 'b.txt' });
    expect(parseDestination(`http://127.0.0.1:8080/api/v1/dav/${WS}/b%20c.txt`, host)).toEqual({ workspace: WS, path: 'b c.txt' });
    expect(parseDestination(`https://user@127.0.0.1:8080/api/v1/dav/${WS}/x/`, host)).toEqual({ workspace: WS, path: 'x' });
  });
  it('tells another server and malformed values apart', () => {
    expect(parseDestination(`http://evil.example/api/v1/dav/${WS}/b.txt`, host)).toBe('other_server');
    expect(parseDestination(undefined, host)).toBe('malformed');
    expect(parseDestination(`http://[::1/api/v1/dav/${WS}/b.txt`, host)).toBe('malformed');
    expect(parseDestination('', host)).toBe('malformed');
    expect(parseDestination('b.txt', host)).toBe('malformed');
    expect(parseDestination(`/api/v1/dav/${WS}/b.txt?x=1`, host)).toBe('malformed');
    expect(parseDestination('/api/v1/data-resources/x', host)).toBe('malformed');
  });
  it('refuses hostile paths in it', () => {
    expect(() => parseDestination(`/api/v1/dav/${WS}/../other/x`, host)).toThrow(InvalidPathError);
    expect(() => parseDestination(`http://127.0.0.1:8080/api/v1/dav/${WS}/a%2F..%2Fx`, host)).toThrow(InvalidPathError);
  });
});

describe('hrefs and the multistatus document', () => {
  it('encodes each segment and marks folders with a trailing slash', () => {
    expect(davHref(WS, '', true)).toBe(`/api/v1/dav/${WS}/`);
    expect(davHref(WS, 'a b/c#d?.txt', false)).toBe(`/api/v1/dav/${WS}/a%20b/c%23d%3F.txt`);
    expect(davHref(WS, 'dir', true)).toBe(`/api/v1/dav/${WS}/dir/`);
  });
  it('escapes names and types', () => {
    const xml = multistatus([{ href: davHref(WS, '<&>.txt', false), name: '<&>"\'.txt', folder: false, updatedAt: '2026-01-01T00:00:00.000Z' }]);
    expect(xml).toContain('<D:displayname>&lt;&amp;&gt;&quot;&apos;.txt</D:displayname>');
    expect(xml).toContain(`<D:href>/api/v1/dav/${WS}/%3C%26%3E.txt</D:href>`);
    expect(xml).toContain('<D:getlastmodified>Thu, 01 Jan 2026 00:00:00 GMT</D:getlastmodified>');
  });
  it('knows when one path lies within another', () => {
    expect(isWithin('a/b', 'a')).toBe(true);
    expect(isWithin('a', 'a')).toBe(true);
    expect(isWithin('ab', 'a')).toBe(false);
    expect(isWithin('x', '')).toBe(true);
  });
});

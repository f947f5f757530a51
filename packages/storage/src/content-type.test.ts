import { describe, expect, it } from 'vitest';
import { mediaTypeOf, normalizeContentType, typeFromExtension } from './content-type.js';

describe('stored content type (docs/contract/spec.md §4.5: never the declared type echoed blindly)', () => {
  it.each([
    ['a.txt', 'text/plain', 'text/plain'],
    ['a.txt', 'TEXT/PLAIN', 'text/plain'],
    ['a.txt', 'text/plain; charset=UTF-8', 'text/plain; charset=utf-8'],
    ['a.txt', 'text/plain;charset="utf-8"', 'text/plain; charset=utf-8'],
    ['a.txt', 'text/plain; format=flowed; charset=iso-8859-1; x=y', 'text/plain; charset=iso-8859-1'],
    ['a.txt', 'text/plain; charset=<script>', 'text/plain'],
    ['a.txt', 'text/plain; charset=', 'text/plain'],
    ['a.json', 'application/json; charset=utf-8', 'application/json'],
    ['a.html', 'text/html; charset=utf-8', 'text/html; charset=utf-8'],
    ['img.png', 'image/png; name="x.html"', 'image/png'],
    ['img.svg', 'image/svg+xml', 'image/svg+xml'],
    // Missing, malformed or meaningless: the extension decides.
    ['a.csv', undefined, 'text/csv'],
    ['a.csv', '', 'text/csv'],
    ['a.csv', 'application/octet-stream', 'text/csv'],
    ['a.csv', 'application/x-www-form-urlencoded', 'text/csv'],
    ['a.csv', 'multipart/form-data; boundary=----x', 'text/csv'],
    ['a.csv', 'multipart/mixed', 'text/csv'],
    ['a.csv', 'text', 'text/csv'],
    ['a.csv', 'text/', 'text/csv'],
    ['a.csv', 'text/html garbage', 'text/csv'],
    ['a.csv', 'text/h<tml', 'text/csv'],
    ['a.csv', 'a/b/c', 'text/csv'],
    ['notebook.IPYNB', undefined, 'application/x-ipynb+json'],
    ['page.htm', undefined, 'text/html'],
    ['no-extension', undefined, 'application/octet-stream'],
    ['archive.unknownext', 'application/octet-stream', 'application/octet-stream'],
  ])('%s declared %j → %j', (path, declared, stored) => {
    expect(normalizeContentType(path, declared)).toBe(stored);
  });

  it('reads the media type of a Content-Type value, or nothing when malformed', () => {
    expect(mediaTypeOf('Image/PNG; q=1')).toBe('image/png');
    expect(mediaTypeOf('nonsense')).toBeUndefined();
    expect(mediaTypeOf(undefined)).toBeUndefined();
    expect(typeFromExtension('x/y.webp')).toBe('image/webp');
  });
});

import { describe, expect, it } from 'vitest';
import { contentDisposition, isSafeInline, objectContentHeaders } from './object-headers.js';

describe('object content headers (docs/contract/spec.md §4.5)', () => {
  it('shows only raster images, PDF and plain text inline', () => {
    for (const t of ['image/png', 'image/jpeg', 'image/gif', 'image/webp', 'application/pdf', 'text/plain', 'text/plain; charset=utf-8', 'IMAGE/PNG']) {
      expect(isSafeInline(t), t).toBe(true);
    }
    for (const t of [
      'text/html',
      'image/svg+xml',
      'application/xml',
      'text/xml',
      'application/xhtml+xml',
      'text/javascript',
      'application/javascript',
      'application/json',
      'text/css',
      'image/bmp',
      'application/octet-stream',
      'text/plainx',
      'garbage',
    ]) {
      expect(isSafeInline(t), t).toBe(false);
    }
  });

  it('always sends nosniff and a sandbox CSP; an attachment unless safe', () => {
    expect(objectContentHeaders('a/report.html', 'text/html')).toEqual({
      'content-type': 'text/html',
      'x-content-type-options': 'nosniff',
      'content-security-policy': 'sandbox',
      'content-disposition': `attachment; filename="report.html"; filename*=UTF-8''report.html`,
      'cache-control': 'private, no-cache',
    });
    expect(objectContentHeaders('pic.png', 'image/png')['content-disposition']).toMatch(/^inline; /);
    // Rows stored before normalisation are normalised on the way out too.
    expect(objectContentHeaders('old.html', 'application/octet-stream')).toMatchObject({
      'content-type': 'text/html',
      'content-disposition': expect.stringMatching(/^attachment/) as unknown,
    });
    expect(objectContentHeaders('old.txt', 'TEXT/PLAIN; Charset=UTF-8; x=1')).toMatchObject({
      'content-type': 'text/plain; charset=utf-8',
      'content-disposition': expect.stringMatching(/^inline/) as unknown,
    });
  });

  it('writes a safe ASCII fallback and the exact UTF-8 name (RFC 6266, RFC 5987)', () => {
    expect(contentDisposition('attachment', 'a "b" \\ c%.txt')).toBe(`attachment; filename="a _b_ _ c_.txt"; filename*=UTF-8''a%20%22b%22%20%5C%20c%25.txt`);
    expect(contentDisposition('inline', "naïve (1)*'.png")).toBe(`inline; filename="na_ve (1)*'.png"; filename*=UTF-8''na%C3%AFve%20%281%29%2A%27.png`);
    expect(contentDisposition('attachment', 'emoji-😀.txt')).toBe(`attachment; filename="emoji-__.txt"; filename*=UTF-8''emoji-%F0%9F%98%80.txt`);
  });
});

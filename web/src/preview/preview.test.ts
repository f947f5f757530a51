import { describe, expect, it } from 'vitest';
import { parseCsv } from './csv';
import { previewKind } from './kind';

describe('previewKind', () => {
  it('renders only raster images as images; SVG and HTML are text (their source), never markup', () => {
    expect(previewKind('a/photo.png', 'image/png')).toBe('image');
    expect(previewKind('a/photo.webp', 'image/webp')).toBe('image');
    expect(previewKind('a/logo.svg', 'image/svg+xml')).toBe('text');
    expect(previewKind('a/page.html', 'text/html; charset=utf-8')).toBe('text');
    // A raster name with a script type is not an image.
    expect(previewKind('a/evil.png', 'text/html')).toBe('text');
    expect(previewKind('a/evil.png', 'application/octet-stream')).toBe('none');
    expect(previewKind('nb/x.ipynb', 'application/x-ipynb+json')).toBe('notebook');
    expect(previewKind('t/data.CSV', 'application/octet-stream')).toBe('csv');
    expect(previewKind('t/data.tsv', 'text/tab-separated-values')).toBe('csv');
    expect(previewKind('src/main.py', 'application/octet-stream')).toBe('text');
    expect(previewKind('archive.zip', 'application/zip')).toBe('none');
  });
});

describe('parseCsv', () => {
  it('reads quoted fields, doubled quotes, separators and line breaks inside quotes, CRLF', () => {
    expect(parseCsv('a,b\r\n"x, y","say ""hi"""\n"two\nlines",3', 10)).toEqual({
      rows: [
        ['a', 'b'],
        ['x, y', 'say "hi"'],
        ['two\nlines', '3'],
      ],
      more: false,
    });
  });
  it('stops after maxRows and says there is more', () => {
    const text = Array.from({ length: 500 }, (_, i) => `${i},${i * 2}`).join('\n');
    const { rows, more } = parseCsv(text, 100);
    expect(rows).toHaveLength(100);
    expect(rows[99]).toEqual(['99', '198']);
    expect(more).toBe(true);
  });
  it('takes tabs for .tsv and keeps empty fields', () => {
    expect(parseCsv('a\t\tc\n', 10, '\t')).toEqual({ rows: [['a', '', 'c']], more: false });
  });
});

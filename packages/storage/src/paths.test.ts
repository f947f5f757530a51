import { describe, expect, it } from 'vitest';
import { InvalidPathError, validateNewObjectPath, validateObjectPath, validatePrefix } from './paths.js';

/** Hostile encodings: every one must be refused. Decoded forms are what reaches the rule. */
const HOSTILE: [string, string][] = [
  ['..', 'parent'],
  ['../etc/passwd', 'leading parent'],
  ['a/../../b', 'inner parent'],
  ['a/..', 'trailing parent'],
  ['.', 'dot'],
  ['./a', 'leading dot'],
  ['a/./b', 'inner dot'],
  ['/etc/passwd', 'absolute'],
  ['//server/share', 'UNC-like'],
  ['a//b', 'empty segment'],
  ['a/', 'trailing slash'],
  ['', 'empty'],
  ['a\\b', 'backslash'],
  ['..\\..\\windows', 'backslash parents'],
  ['C:\\Windows', 'drive path'],
  ['\\\\server\\share', 'UNC'],
  ['a\u0000b', 'NUL'],
  ['a\u0000/../../etc', 'NUL truncation'],
  ['a\nb', 'newline'],
  ['a\rb', 'carriage return'],
  ['a\tb', 'tab'],
  ['a\u001bb', 'escape'],
  ['a\u007fb', 'DEL'],
  ['a\u0085b', 'C1 next line'],
  ['a\u009bb', 'C1 CSI'],
  [decodeURIComponent('%2e%2e'), '%2e%2e decoded once'],
  [decodeURIComponent('%2e%2e%2fetc'), '%2e%2e%2f decoded once'],
  [decodeURIComponent('a%2f..%2f..%2fb'), '%2f decoded once'],
  [decodeURIComponent('%5c..%5c'), '%5c decoded once'],
  [decodeURIComponent('%00'), '%00 decoded once'],
  ['x'.repeat(1025), 'overlong (1025 bytes)'],
  ['é'.repeat(513), 'overlong in UTF-8 bytes (1026)'],
  [`${'a/'.repeat(512)}b`, 'overlong with segments'],
  ['\ud800', 'lone high surrogate'],
  ['a\udc00b', 'lone low surrogate'],
  ['..%2f'.replace('%2f', '/') + '..', 'mixed'],
  ['a/.', 'trailing dot'],
  [decodeURIComponent('%2E/a'), '%2E decoded once'],
  [decodeURIComponent('%2e'), 'lone %2e decoded once'],
  [decodeURIComponent('a/%2e/b'), 'inner %2e decoded once'],
  [decodeURIComponent('.%2fa'), '.%2f decoded once'],
  [decodeURIComponent('%2e%2fa%2f%2e'), 'all-encoded dots decoded once'],
  [decodeURIComponent('a/.%2e/b'), 'half-encoded parent decoded once'],
  ['.\\a', 'dot backslash'],
];

/** Names that look odd but are ordinary (they cannot leave their directory). */
const ORDINARY = [
  'a',
  'notebooks/analysis.ipynb',
  '.hidden',
  '..hidden',
  'a..b',
  '...',
  'a/b/c/d.csv',
  '%2e%2e',
  '%2e%2e%2fetc',
  'a%5cb',
  'über/naïve.txt',
  'a\u2215..\u2215b',
  'a\uff0f..\uff0fb',
  '\u2024\u2024',
  'a\u2044b',
  'emoji-😀.txt',
  'x'.repeat(1024),
  'with space/and+plus&amp.txt',
];

describe('object path rule (docs/contract/spec.md §4.3)', () => {
  it.each(HOSTILE)('refuses %j (%s)', (path) => {
    expect(() => validateObjectPath(path)).toThrow(InvalidPathError);
  });

  it.each(ORDINARY.map((p) => [p]))('accepts %j', (path) => {
    expect(validateObjectPath(path)).toBe(path);
  });

  it('has a corpus of at least 30 hostile encodings', () => {
    expect(HOSTILE.length).toBeGreaterThanOrEqual(30);
  });

  it('refuses non-strings and names the broken rule', () => {
    expect(() => validateObjectPath(undefined)).toThrow(/must be a string/);
    expect(() => validateObjectPath('a/../b')).toThrow(/\.\. segment/);
    expect(() => validateObjectPath('a/./b')).toThrow(/a \. segment/);
  });

  it('checks listing prefixes, which may be empty or end with /', () => {
    expect(validatePrefix('')).toBe('');
    expect(validatePrefix('notebooks/')).toBe('notebooks/');
    expect(() => validatePrefix('../')).toThrow(InvalidPathError);
    expect(() => validatePrefix('/abs')).toThrow(InvalidPathError);
  });

  describe('a name being given: no bidirectional control character (a name that displays as another)', () => {
    const SPOOFS: [string, string][] = [
      ['invoice\u202efdp.exe', 'right-to-left override: shows as invoiceexe.pdf'],
      ['a/\u202dreport.csv', 'left-to-right override'],
      ['\u202areport', 'left-to-right embedding'],
      ['\u202breport', 'right-to-left embedding'],
      ['report\u202c.txt', 'pop directional formatting'],
      ['report\u2066.txt', 'left-to-right isolate'],
      ['report\u2067.txt', 'right-to-left isolate'],
      ['report\u2068.txt', 'first strong isolate'],
      ['report\u2069.txt', 'pop directional isolate'],
      ['report\u200e.txt', 'left-to-right mark'],
      ['report\u200f.txt', 'right-to-left mark'],
      ['report\u061c.txt', 'Arabic letter mark'],
    ];
    it.each(SPOOFS)('refuses %j (%s), naming the character', (path) => {
      expect(() => validateNewObjectPath(path)).toThrow(/bidirectional control characters \(U\+[0-9A-F]{4}\)/);
      // Stored before the rule: still readable, movable and deletable.
      expect(validateObjectPath(path)).toBe(path);
    });

    it.each([
      ['zw\u200bsp.txt', 'zero-width space'],
      ['\ufeffbom.txt', 'byte-order mark'],
      ['re\u00adport.txt', 'soft hyphen'],
      ['report\u2060.txt', 'word joiner'],
      ['\u3164.txt', 'Hangul filler'],
      ['a/\u180ereport', 'Mongolian vowel separator'],
      ['a\u{e0020}.txt', 'tag space, outside an emoji flag'],
      ['a\ufff9.txt', 'interlinear annotation anchor'],
      ['a\u{1d173}.txt', 'musical symbol begin beam'],
      ['a\u{13430}.txt', 'Egyptian hieroglyph vertical joiner'],
      ['a\u{1bca0}.txt', 'shorthand format letter overlap'],
      ['\u034f.txt', 'combining grapheme joiner'],
    ])('refuses %j (%s): an invisible character, named', (path) => {
      expect(() => validateNewObjectPath(path)).toThrow(/invisible characters \(U\+[0-9A-F]{4,6}\)/);
      expect(validateObjectPath(path)).toBe(path);
    });

    it('accepts the joiners and variation selectors that scripts and emoji need', () => {
      const england = '\u{1f3f4}\u{e0067}\u{e0062}\u{e0065}\u{e006e}\u{e0067}\u{e007f}';
      for (const p of ['می\u200cخواهم.txt', '\u{1F469}\u200d\u{1F4BB}.txt', '\u2764\ufe0f.txt', `${england}.txt`]) expect(validateNewObjectPath(p)).toBe(p);
    });

    it('accepts right-to-left text itself, and applies the object-path rule first', () => {
      expect(validateNewObjectPath('تقارير/تقرير.csv')).toBe('تقارير/تقرير.csv');
      expect(validateNewObjectPath('שלום.txt')).toBe('שלום.txt');
      for (const p of ORDINARY) expect(validateNewObjectPath(p)).toBe(p);
      expect(() => validateNewObjectPath('../\u202e')).toThrow(/\.\. segment/);
    });
  });
});

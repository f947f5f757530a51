import { describe, expect, it } from 'vitest';
import { BadRequestError } from './errors.js';
import { decodeCursor, encodeCursor, keysetPage } from './pagination.js';

const b64 = (value: string) => Buffer.from(value).toString('base64url');
const ID = '3f2c7a4e-9b1d-4c8e-a6f0-1d2e3f405162';
const AT = '2024-05-06T07:08:09.123Z';

describe('keyset cursors (docs/contract/spec.md §4.5: a malformed or foreign cursor is 400, never 500)', () => {
  it('round-trips the sort key of the last item, typed by the shape of the list', () => {
    const page = keysetPage(
      [
        { at: new Date(AT), id: ID },
        { at: new Date(AT), id: ID },
      ],
      1,
      (r) => [r.at.toISOString(), r.id],
      (r) => r.id,
    );
    expect(page.items).toEqual([ID]);
    const key = decodeCursor(page.next_cursor!, ['time', 'uuid']);
    expect(key).toEqual([new Date(AT), ID]);
    expect(key![0]).toBeInstanceOf(Date);
    expect(decodeCursor(encodeCursor(['notebooks/a b.ipynb']), ['text'])).toEqual(['notebooks/a b.ipynb']);
  });

  it('treats a missing or empty cursor as the first page', () => {
    expect(decodeCursor(undefined, ['time', 'uuid'])).toBeUndefined();
    expect(decodeCursor('', ['text'])).toBeUndefined();
  });

  const FOREIGN: [string, string][] = [
    [b64('["zzz","x"]'), 'the issue’s example: a string for a date, a non-UUID id'],
    [b64(`["${AT}"]`), 'too few fields'],
    [b64(`["${AT}","${ID}","extra"]`), 'too many fields'],
    [b64(`[1714979289123,"${ID}"]`), 'a number for a date'],
    [b64(`["${AT}",42]`), 'a number for an id'],
    [b64(`[null,"${ID}"]`), 'null'],
    [b64(`[["${AT}"],"${ID}"]`), 'nested array'],
    [b64(`{"at":"${AT}","id":"${ID}"}`), 'an object'],
    [b64(`"${AT}"`), 'a bare string'],
    [b64(`["${AT}","not-a-uuid"]`), 'a non-UUID id'],
    [b64(`["${AT}","${ID}x"]`), 'a UUID with a tail'],
    [b64(`["2024-13-45T99:99:99Z","${ID}"]`), 'an impossible date'],
    [b64(`["2024-05-06","${ID}"]`), 'a date without time'],
    [b64(`["Mon May 06 2024","${ID}"]`), 'a date in another format'],
    [b64(`["+275760-09-13T00:00:00.000Z","${ID}"]`), 'an expanded year'],
    [b64(`["", "${ID}"]`), 'an empty date'],
    ['not base64 at all!', 'not base64url'],
    [b64('[1,2'), 'truncated JSON'],
    [b64(' '), 'blank JSON text'],
    [b64('\u0000'), 'a NUL byte'],
  ];
  it.each(FOREIGN)('refuses %j (%s) as invalid_request', (cursor) => {
    let thrown: unknown;
    try {
      decodeCursor(cursor, ['time', 'uuid']);
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(BadRequestError);
    expect(thrown).toMatchObject({ statusCode: 400, code: 'invalid_request', extra: { fields: { cursor: 'invalid cursor' } } });
  });

  it.each([
    [b64('[42]'), 'a number'],
    [b64('[""]'), 'an empty path'],
    [b64('["a\\u0000b"]'), 'a NUL character, which PostgreSQL text refuses'],
    [b64('["a\\nb"]'), 'a control character'],
    [b64('["\\ud800"]'), 'a lone surrogate'],
    [b64('["a","b"]'), 'two fields'],
  ])('refuses a text cursor %j (%s)', (cursor) => {
    expect(() => decodeCursor(cursor, ['text'])).toThrow(BadRequestError);
  });
});

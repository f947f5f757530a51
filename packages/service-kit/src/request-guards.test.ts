import { request } from 'node:http';
import Fastify from 'fastify';
import { describe, expect, it } from 'vitest';
import { serviceKit } from './plugin.js';
import { MAX_JSON_DEPTH, ambiguousPathReason, exceedsJsonDepth } from './request-guards.js';

const nestedArrays = (depth: number) => `${'['.repeat(depth)}${']'.repeat(depth)}`;
const nestedObjects = (depth: number) => `${'{"a":'.repeat(depth - 1)}{}${'}'.repeat(depth - 1)}`;

describe('JSON depth limit (docs/contract/spec.md §4.5)', () => {
  it('counts the outermost object or array as level 1', () => {
    expect(exceedsJsonDepth(JSON.parse(nestedArrays(MAX_JSON_DEPTH)))).toBe(false);
    expect(exceedsJsonDepth(JSON.parse(nestedArrays(MAX_JSON_DEPTH + 1)))).toBe(true);
    expect(exceedsJsonDepth(JSON.parse(nestedObjects(MAX_JSON_DEPTH)))).toBe(false);
    expect(exceedsJsonDepth(JSON.parse(nestedObjects(MAX_JSON_DEPTH + 1)))).toBe(true);
    expect(exceedsJsonDepth({ a: [1, { b: 'x' }], c: null })).toBe(false);
  });

  it('walks a million levels without overflowing the stack, and ignores non-JSON bodies', () => {
    expect(exceedsJsonDepth(JSON.parse(nestedArrays(1_000_000)))).toBe(true);
    expect(exceedsJsonDepth(Buffer.from(nestedArrays(100)))).toBe(false);
    expect(exceedsJsonDepth(nestedArrays(100))).toBe(false);
    expect(exceedsJsonDepth(undefined)).toBe(false);
  });

  async function app() {
    const a = Fastify();
    await a.register(serviceKit);
    // JSON.stringify recurses: a deep body would overflow the stack here without the guard.
    a.post('/echo', (req) => ({ length: JSON.stringify(req.body).length }));
    return a;
  }

  it('answers 400 invalid_request for 5,000 nested arrays, in every service through serviceKit', async () => {
    const a = await app();
    for (const payload of [nestedArrays(5_000), `{"parameters":${nestedArrays(5_000)}}`, nestedObjects(MAX_JSON_DEPTH + 1)]) {
      const res = await a.inject({ method: 'POST', url: '/echo', headers: { 'content-type': 'application/json' }, payload });
      expect(res.statusCode).toBe(400);
      expect(res.json()).toMatchObject({ error: 'invalid_request', fields: { body: expect.stringMatching(/64/) as unknown } });
    }
    const ok = await a.inject({ method: 'POST', url: '/echo', headers: { 'content-type': 'application/json' }, payload: nestedArrays(MAX_JSON_DEPTH) });
    expect(ok.statusCode).toBe(200);
    await a.close();
  });
});

describe('dot segments and backslashes in request paths (docs/contract/spec.md §4.3)', () => {
  const REFUSED = [
    '/x/./a',
    '/x/a/./b',
    '/x/a/.',
    '/x/%2E/a',
    '/x/%2e/a',
    '/x/a/%2e/b',
    '/x/.%2fa',
    '/x/%2e%2fa',
    '/x/a%2F.%2Fb',
    '/x/..',
    '/x/a/../b',
    '/x/%2e%2e/b',
    '/x/.%2E/b',
    '/x/%2E./b',
    '/x/a%5c..%5cb',
    '/x/a%5C.%5Cb',
    '/x/.\\a',
    '/x/a\\b',
    '/./x',
  ];
  it.each(REFUSED)('refuses %j', (url) => {
    expect(ambiguousPathReason(url)).toEqual(expect.any(String));
  });

  const ALLOWED = ['/x/a', '/x/.hidden', '/x/..hidden', '/x/a..b', '/x/...', '/x/%252e/a', '/x/a?path=./b', '/x/a?q=..\\', '/x/%2e%2e%2e'];
  it.each(ALLOWED)('accepts %j', (url) => {
    expect(ambiguousPathReason(url)).toBeUndefined();
  });

  // A raw request target, as curl --path-as-is or a hostile client sends it (fetch and inject
  // would normalise the dot segments away before sending).
  const rawGet = (base: string, path: string) =>
    new Promise<{ status: number; body: string }>((resolve, reject) => {
      const u = new URL(base);
      const req = request({ host: u.hostname, port: u.port, path }, (res) => {
        let body = '';
        res.on('data', (c: Buffer) => (body += c.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      });
      req.on('error', reject);
      req.end();
    });

  it('answers 400 invalid_request before any route, known or not', async () => {
    const a = Fastify();
    await a.register(serviceKit);
    a.get('/x/*', () => ({ ok: true }));
    const base = await a.listen({ host: '127.0.0.1', port: 0 });
    try {
      for (const url of ['/x/%2E/a', '/x/a/./b', '/x/.%2fa', '/nowhere/./x', '/x/a\\..\\b']) {
        const res = await rawGet(base, url);
        expect(res.status, url).toBe(400);
        expect(JSON.parse(res.body)).toMatchObject({ error: 'invalid_request', fields: { path: expect.any(String) as unknown } });
      }
      expect((await rawGet(base, '/x/.hidden')).status).toBe(200);
    } finally {
      await a.close();
    }
  });
});

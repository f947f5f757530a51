import { request } from 'node:http';
import Fastify from 'fastify';
import { describe, expect, it, vi } from 'vitest';
import { serviceKit } from './plugin.js';
import { MAX_JSON_DEPTH, ambiguousPathReason, jsonTextExceedsDepth } from './request-guards.js';

const nestedArrays = (depth: number) => `${'['.repeat(depth)}${']'.repeat(depth)}`;
const nestedObjects = (depth: number) => `${'{"a":'.repeat(depth - 1)}{}${'}'.repeat(depth - 1)}`;

describe('JSON depth limit (docs/contract/spec.md §4.5)', () => {
  it('counts the outermost object or array as level 1, on the text before it is parsed', () => {
    expect(jsonTextExceedsDepth(nestedArrays(MAX_JSON_DEPTH))).toBe(false);
    expect(jsonTextExceedsDepth(nestedArrays(MAX_JSON_DEPTH + 1))).toBe(true);
    expect(jsonTextExceedsDepth(nestedObjects(MAX_JSON_DEPTH))).toBe(false);
    expect(jsonTextExceedsDepth(nestedObjects(MAX_JSON_DEPTH + 1))).toBe(true);
    expect(jsonTextExceedsDepth(JSON.stringify({ a: [1, { b: 'x' }], c: null }))).toBe(false);
    // Brackets inside strings, escaped quotes included, are text.
    expect(jsonTextExceedsDepth(JSON.stringify({ s: '['.repeat(1000), t: 'a"[[[\\"' + '{'.repeat(100) }))).toBe(false);
    // An escaped backslash ends before the quote: the string ends there.
    expect(jsonTextExceedsDepth(`["\\\\"${'['.repeat(MAX_JSON_DEPTH)}`)).toBe(true);
    expect(jsonTextExceedsDepth(`["\\\\"${'['.repeat(MAX_JSON_DEPTH - 1)}`)).toBe(false);
  });

  it('leaves text that is not JSON to the parser', () => {
    expect(jsonTextExceedsDepth('not json at all {')).toBe(false);
    expect(jsonTextExceedsDepth('')).toBe(false);
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

  it('refuses a deep body before parsing it (1 MiB of `[` built a million arrays first), and keeps Fastify’s parsing rules', async () => {
    const a = await app();
    const parse = vi.spyOn(JSON, 'parse');
    try {
      const deep = '['.repeat(1024 * 1024);
      const res = await a.inject({ method: 'POST', url: '/echo', headers: { 'content-type': 'application/json; charset=utf-8' }, payload: deep });
      expect(res.statusCode).toBe(400);
      expect(parse.mock.calls.filter(([text]) => typeof text === 'string' && text.length >= deep.length)).toEqual([]);
      // Prototype poisoning, an empty body, text that is not JSON: refused as before.
      for (const payload of ['{"__proto__": {"admin": true}}', '{"constructor": {"prototype": {"admin": true}}}', '', '{"a": ']) {
        const bad = await a.inject({ method: 'POST', url: '/echo', headers: { 'content-type': 'application/json' }, payload });
        expect(bad.statusCode).toBe(400);
      }
      const fine = await a.inject({ method: 'POST', url: '/echo', headers: { 'content-type': 'application/json' }, payload: '{"s": "[[[[", "n": [1, [2]]}' });
      expect(fine.json()).toEqual({ length: JSON.stringify({ s: '[[[[', n: [1, [2]] }).length });
    } finally {
      parse.mockRestore();
      await a.close();
    }
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

import Fastify from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serviceKit } from './plugin.js';
import { INTERNAL_TOKEN_HEADER, internalTokenHook } from './internal-token.js';

const TOKEN = 'internal-token-for-this-test';

async function app(token: string) {
  const a = Fastify();
  await a.register(serviceKit);
  a.addHook('onRequest', internalTokenHook(token, { skip: (req) => req.url === '/healthz' }));
  a.get('/healthz', () => ({ ok: true }));
  a.post('/action', () => ({ done: true }));
  return a;
}

describe('internalTokenHook: the one check of X-Internal-Service-Token', () => {
  let a: Awaited<ReturnType<typeof app>>;
  beforeAll(async () => {
    a = await app(TOKEN);
  });
  afterAll(() => a.close());

  it('lets the right token through', async () => {
    const res = await a.inject({ method: 'POST', url: '/action', headers: { [INTERNAL_TOKEN_HEADER]: TOKEN } });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ done: true });
  });

  it.each([
    ['no header', {}],
    ['a wrong token', { [INTERNAL_TOKEN_HEADER]: 'wrong' }],
    ['the token with a suffix', { [INTERNAL_TOKEN_HEADER]: `${TOKEN}x` }],
    ['a prefix of the token', { [INTERNAL_TOKEN_HEADER]: TOKEN.slice(0, -1) }],
    ['an empty token', { [INTERNAL_TOKEN_HEADER]: '' }],
    ['the token as a bearer instead', { authorization: `Bearer ${TOKEN}` }],
  ])('answers 401 naming the header to %s, and the handler never runs', async (_name, headers) => {
    const res = await a.inject({ method: 'POST', url: '/action', headers });
    expect(res.statusCode).toBe(401);
    expect(res.body).toContain('X-Internal-Service-Token');
    expect(res.body).not.toContain(TOKEN);
  });

  it('answers 401 to the header sent twice (an array is never a token)', async () => {
    const res = await a.inject({ method: 'POST', url: '/action', headers: { [INTERNAL_TOKEN_HEADER]: [TOKEN, TOKEN] } });
    expect(res.statusCode).toBe(401);
  });

  it('passes the requests that skip says yes to, without a token', async () => {
    expect((await a.inject({ method: 'GET', url: '/healthz' })).statusCode).toBe(200);
  });

  it('with an empty configured token, opens nothing, not even to an empty header', async () => {
    const open = await app('');
    try {
      expect((await open.inject({ method: 'POST', url: '/action', headers: { [INTERNAL_TOKEN_HEADER]: '' } })).statusCode).toBe(401);
      expect((await open.inject({ method: 'POST', url: '/action' })).statusCode).toBe(401);
    } finally {
      await open.close();
    }
  });
});

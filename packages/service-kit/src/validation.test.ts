import { Type } from '@sinclair/typebox';
import Fastify from 'fastify';
import { describe, expect, it } from 'vitest';
import { serviceKit, type ServiceKitOptions } from './plugin.js';

/** A route whose body has fixed-value fields of each kind a schema can express. */
async function app(opts: ServiceKitOptions = {}) {
  const a = Fastify({ ajv: { customOptions: { removeAdditional: false, coerceTypes: 'array', useDefaults: true } } });
  await a.register(serviceKit, opts);
  a.post(
    '/members',
    {
      schema: {
        body: Type.Object(
          {
            email: Type.String({ format: 'email' }),
            role: Type.Union([Type.Literal('viewer'), Type.Literal('editor'), Type.Literal('admin')]),
            mode: Type.Optional(Type.String({ enum: ['fast', 'safe'] })),
            settings: Type.Optional(Type.Object({ theme: Type.Union([Type.Literal('light'), Type.Literal('dark')]) })),
          },
          { additionalProperties: false },
        ),
      },
    },
    () => ({ ok: true }),
  );
  a.get('/items', { schema: { querystring: Type.Object({ order: Type.Optional(Type.Union([Type.Literal('asc'), Type.Literal('desc')])) }) } }, () => ({
    ok: true,
  }));
  return a;
}

async function post(body: unknown) {
  const a = await app();
  const res = await a.inject({ method: 'POST', url: '/members', payload: body as object });
  await a.close();
  return { status: res.statusCode, body: res.json<{ error: string; message: string; fields: Record<string, string> }>() };
}

describe('validation errors name the allowed values (one handler for every route)', () => {
  it('a wrong role: "role must be one of viewer, editor, admin"', async () => {
    const { status, body } = await post({ email: 'a@example.com', role: 'owner' });
    expect(status).toBe(400);
    expect(body).toEqual({
      error: 'invalid_request',
      message: 'request body is invalid: role must be one of viewer, editor, admin',
      fields: { role: 'must be one of viewer, editor, admin' },
    });
    expect(body.message).not.toContain('constant');
  });

  it('a role of another type, an enum and a nested union all name their values', async () => {
    expect((await post({ email: 'a@example.com', role: 7 })).body.fields).toEqual({ role: 'must be one of viewer, editor, admin' });
    expect((await post({ email: 'a@example.com', role: 'viewer', mode: 'slow' })).body.fields).toEqual({ mode: 'must be one of fast, safe' });
    expect((await post({ email: 'a@example.com', role: 'viewer', settings: { theme: 'blue' } })).body.fields).toEqual({
      'settings.theme': 'must be one of light, dark',
    });
  });

  it('other problems keep their own words', async () => {
    expect((await post({ email: 'a@example.com', role: 'viewer', extra: 1 })).body.fields).toEqual({ extra: 'unknown field' });
    expect((await post({ email: 'not-an-email', role: 'viewer' })).body.fields).toEqual({ email: 'must match format "email"' });
    expect((await post({ role: 'viewer' })).body.fields).toEqual({ email: "must have required property 'email'" });
  });

  it('query parameters too', async () => {
    const a = await app();
    const res = await a.inject({ method: 'GET', url: '/items?order=sideways' });
    await a.close();
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ message: 'request querystring is invalid: order must be one of asc, desc' });
  });

  it('a service may name the error of its schema violations (the cluster service: "validation failed")', async () => {
    const a = await app({ validationError: 'validation failed' });
    const res = await a.inject({ method: 'GET', url: '/items?order=sideways' });
    await a.close();
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual({
      error: 'validation failed',
      message: 'request querystring is invalid: order must be one of asc, desc',
      fields: { order: 'must be one of asc, desc' },
    });
  });
});

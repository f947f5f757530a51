import Fastify from 'fastify';
import { describe, expect, it } from 'vitest';
import { HashingBusyError } from '@codeagent/auth';
import {
  AppError,
  BadRequestError,
  ConflictError,
  NotFoundError,
  PreconditionFailedError,
  RangeNotSatisfiableError,
  TooManyRequestsError,
  UnsupportedMediaTypeError,
} from './errors.js';
import { serviceKit } from './plugin.js';

/** Each route throws one error; the kit's one handler turns it into the answer. */
async function answerTo(err: Error) {
  const app = Fastify();
  await app.register(serviceKit);
  app.get('/fail', () => {
    throw err;
  });
  const res = await app.inject({ method: 'GET', url: '/fail' });
  await app.close();
  return { status: res.statusCode, headers: res.headers, body: res.json<Record<string, unknown>>() };
}

describe('one error-to-HTTP map (decision 0121)', () => {
  it('answers every AppError with its status, its code as `error`, its message and extras', async () => {
    expect(await answerTo(new BadRequestError('name is missing', { name: 'required' }))).toMatchObject({
      status: 400,
      body: { error: 'invalid_request', message: 'name is missing', fields: { name: 'required' } },
    });
    expect(await answerTo(new ConflictError('exists'))).toMatchObject({ status: 409, body: { error: 'conflict', message: 'exists' } });
    expect(await answerTo(new PreconditionFailedError('a exists and Overwrite is F'))).toMatchObject({ status: 412, body: { error: 'precondition_failed' } });
    expect(await answerTo(new UnsupportedMediaTypeError('MKCOL takes no body'))).toMatchObject({ status: 415, body: { error: 'unsupported_media_type' } });
    expect(await answerTo(new AppError(502, 'bad_gateway', 'elsewhere'))).toMatchObject({ status: 502, body: { error: 'bad_gateway', message: 'elsewhere' } });
  });

  it("carries docs/contract/spec.md §8's own error strings where a service passes them", async () => {
    expect(await answerTo(new NotFoundError('no such cluster', 'not found'))).toMatchObject({ status: 404, body: { error: 'not found' } });
    expect(await answerTo(new BadRequestError('invalid', { limit: 'an integer from 1 to 1000' }, 'validation failed'))).toMatchObject({
      status: 400,
      body: { error: 'validation failed', fields: { limit: 'an integer from 1 to 1000' } },
    });
  });

  it("sends the error's headers: Retry-After of a 429, Content-Range of a 416", async () => {
    const limited = await answerTo(new TooManyRequestsError('slow down', 2.2));
    expect(limited.status).toBe(429);
    expect(limited.headers['retry-after']).toBe('3');
    expect((await answerTo(new TooManyRequestsError('slow down'))).headers['retry-after']).toBeUndefined();
    const range = await answerTo(new RangeNotSatisfiableError(10));
    expect(range).toMatchObject({ status: 416, body: { error: 'range_not_satisfiable', message: 'the object has 10 bytes' } });
    expect(range.headers['content-range']).toBe('bytes */10');
  });

  it('refuses at once when password hashing is full, and hides other errors behind the request id', async () => {
    const busy = await answerTo(new HashingBusyError());
    expect(busy.status).toBe(429);
    expect(busy.headers['retry-after']).toBe('1');
    const internal = await answerTo(new Error('connection string postgres://u:secret@db'));
    expect(internal.status).toBe(500);
    expect(JSON.stringify(internal.body)).not.toContain('secret');
    expect(internal.body.message).toContain(String(internal.headers['x-request-id']));
  });

  it('answers a full disk (the file system, PostgreSQL) 507 insufficient_storage, with no detail of where', async () => {
    const full = (code: string) => Object.assign(new Error(`${code}: no space left on device, write '/srv/data/x.tmp'`), { code });
    for (const code of ['ENOSPC', 'EDQUOT', '53100']) {
      const answer = await answerTo(full(code));
      expect(answer.status, code).toBe(507);
      expect(answer.body).toEqual({
        error: 'insufficient_storage',
        message: "the platform's disk is full: nothing was stored; ask an administrator to free space",
      });
    }
    expect((await answerTo(full('EIO'))).status).toBe(500);
  });
});

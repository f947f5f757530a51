import { describe, expect, it } from 'vitest';
import { FormatRegistry } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';
import type { ClusterRow } from '@codeagent/db';
import { BadRequestError, isUuid } from '@codeagent/service-kit';
import { toClusterDto, validateCluster } from './clusters.js';
import { Cluster, ClusterBody } from './schemas.js';

const v = { name: 'a', base_url: 'https://rm.example.com/x', auth_type: 'none', rate_limit: 0 };
const REQUIRED = {
  name: 'required, 1–100 characters',
  base_url: 'required, an absolute http or https URL',
  auth_type: 'required, one of none, simple, basic',
  rate_limit: 'required, an integer >= 0',
};

const fieldsOf = (body: unknown): unknown => {
  try {
    validateCluster(body);
  } catch (err) {
    expect(err).toBeInstanceOf(BadRequestError);
    expect((err as BadRequestError).code).toBe('validation failed');
    return (err as BadRequestError).extra.fields;
  }
  return undefined;
};

describe('the cluster body is checked by its TypeBox schema (docs/contract/spec.md §8.2)', () => {
  // The reasons are the ones the hand-written validator gave, word for word.
  it.each<[string, unknown, Record<string, string>]>([
    ['null', null, { body: 'must be a JSON object', ...REQUIRED }],
    ['an array', [], { body: 'must be a JSON object', ...REQUIRED }],
    ['{}', {}, REQUIRED],
    ['a blank name', { ...v, name: '   ' }, { name: 'required, 1–100 characters' }],
    ['a name of 101 characters', { ...v, name: 'x'.repeat(101) }, { name: 'at most 100 characters' }],
    ['an ftp base_url', { ...v, base_url: 'ftp://h' }, { base_url: 'must use http or https' }],
    ['a number as base_url', { ...v, base_url: 5 }, { base_url: 'required, an absolute http or https URL' }],
    ['auth_type kerberos', { ...v, auth_type: 'kerberos' }, { auth_type: 'required, one of none, simple, basic' }],
    ['basic without username', { ...v, auth_type: 'basic' }, { username: 'required when auth_type is basic' }],
    ['basic with a number as username', { ...v, auth_type: 'basic', username: 5 }, { username: 'required when auth_type is basic' }],
    ['rate_limit -1', { ...v, rate_limit: -1 }, { rate_limit: 'must be an integer >= 0' }],
    ['rate_limit 1.5', { ...v, rate_limit: 1.5 }, { rate_limit: 'must be an integer >= 0' }],
    ['rate_limit "5" (no coercion)', { ...v, rate_limit: '5' }, { rate_limit: 'must be an integer >= 0' }],
    ['rate_limit null', { ...v, rate_limit: null }, { rate_limit: 'required, an integer >= 0' }],
    ['rate_limit 2^31', { ...v, rate_limit: 2 ** 31 }, { rate_limit: 'too large' }],
    [
      'every field of the wrong type',
      { name: 5, base_url: 5, auth_type: 5, username: 5, AuthPassword: 5, rate_limit: 'x', description: 5 },
      {
        ...REQUIRED,
        username: 'must be a string',
        AuthPassword: 'must be a string',
        rate_limit: 'must be an integer >= 0',
        description: 'must be a string',
      },
    ],
  ])('%s → 400 validation failed with every field named', (_, body, fields) => {
    expect(fieldsOf(body)).toEqual(fields);
  });

  it('accepts a valid body, normalized, and ignores fields it does not know (a GET answer sent back)', () => {
    const body = { ...v, name: '  yarn  ', auth_type: 'basic', username: 'ops', AuthPassword: 'pw', description: null, id: 'x', has_password: true };
    expect(Value.Check(ClusterBody, body)).toBe(true);
    expect(validateCluster(body)).toEqual({
      name: 'yarn',
      base_url: v.base_url,
      auth_type: 'basic',
      username: 'ops',
      password: 'pw',
      rate_limit: 0,
      description: null,
    });
    // An empty or null password and username mean "none" (on update: keep the stored password).
    expect(validateCluster({ ...v, username: '', AuthPassword: '' })).toMatchObject({ username: null, password: undefined });
    expect(validateCluster({ ...v, username: null, AuthPassword: null })).toMatchObject({ username: null, password: undefined });
  });

  it('answers a cluster that matches its schema, without the password', () => {
    // TypeBox's Value knows no formats of its own (Fastify's ajv does): these two, for this check.
    FormatRegistry.Set('uuid', isUuid);
    FormatRegistry.Set('date-time', (s) => new Date(s).toISOString() === s);
    const at = new Date('2026-01-02T03:04:05.000Z');
    const row = {
      id: '00000000-0000-4000-8000-000000000001',
      name: 'yarn',
      base_url: 'https://rm.example.com/x',
      auth_type: 'basic',
      username: 'ops',
      password_enc: 'sealed',
      rate_limit: 3,
      description: null,
      created_at: at,
      updated_at: at,
    } as ClusterRow;
    const dto = toClusterDto(row);
    expect(Value.Check(Cluster, dto)).toBe(true);
    expect(Object.keys(dto).sort()).toEqual(Object.keys(Cluster.properties).sort());
    expect(dto).toMatchObject({ has_password: true });
    expect(JSON.stringify(dto)).not.toContain('sealed');
  });
});

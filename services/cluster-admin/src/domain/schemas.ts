import { Type, type Static, type TSchema } from '@sinclair/typebox';
import { Value, ValueErrorType, type ValueError } from '@sinclair/typebox/value';
import { ListQuery } from '@codeagent/service-kit';

/**
 * The cluster record of docs/contract/spec.md §8.2 as TypeBox schemas: `ClusterBody` is what
 * POST and PUT accept (checked by `clusterBodyFields`), `Cluster` what every answer carries;
 * `ClusterDto` is its `Static<>`.
 *
 * Each field of the body names its §8 `fields` reasons in the schema: `required` (absent or
 * null), `invalid` (wrong type or shape), `tooLarge` (over `maxLength` / `maximum`).
 */
interface Reasons {
  required?: string;
  invalid: string;
  tooLarge?: string;
}
const reasons = (r: Reasons) => ({ reasons: r });

const AuthType = Type.Union(
  [Type.Literal('none'), Type.Literal('simple'), Type.Literal('basic')],
  reasons({ invalid: 'required, one of none, simple, basic' }),
);
const OptionalString = (invalid: string) => Type.Optional(Type.Union([Type.String(), Type.Null()], reasons({ invalid })));

/** The longest cluster name (§8.2). */
export const NAME_MAX = 100;

export const ClusterBody = Type.Object({
  // `\S`: not blank (the name is stored trimmed).
  name: Type.String({
    minLength: 1,
    maxLength: NAME_MAX,
    pattern: '\\S',
    ...reasons({ invalid: 'required, 1–100 characters', tooLarge: 'at most 100 characters' }),
  }),
  // The URL's own rules (scheme, no credentials) are `baseUrlProblem`'s, checked after the schema.
  base_url: Type.String({ minLength: 1, ...reasons({ invalid: 'required, an absolute http or https URL' }) }),
  auth_type: AuthType,
  username: OptionalString('must be a string'),
  AuthPassword: OptionalString('must be a string'),
  rate_limit: Type.Integer({
    minimum: 0,
    maximum: 2_147_483_647,
    ...reasons({ required: 'required, an integer >= 0', invalid: 'must be an integer >= 0', tooLarge: 'too large' }),
  }),
  description: OptionalString('must be a string'),
});
export type ClusterBody = Static<typeof ClusterBody>;

const Nullable = <T extends TSchema>(t: T) => Type.Union([t, Type.Null()]);

/** A cluster as answered (docs/contract/spec.md §8.2): `has_password` instead of `AuthPassword`. */
export const Cluster = Type.Object({
  id: Type.String({ format: 'uuid' }),
  name: Type.String(),
  base_url: Type.String(),
  auth_type: AuthType,
  username: Nullable(Type.String()),
  has_password: Type.Boolean(),
  rate_limit: Type.Integer(),
  description: Nullable(Type.String()),
  created_at: Type.String({ format: 'date-time' }),
  updated_at: Type.String({ format: 'date-time' }),
});
export type ClusterDto = Static<typeof Cluster>;

/** `GET /admin/clusters` (docs/contract/spec.md §8.3 fixes the name `clusters`; the list is whole, no cursor). */
export const ClusterList = Type.Object({ clusters: Type.Array(Cluster) });

/** An audit entry (docs/contract/spec.md §8.3); `details` holds `before`, `after` and `changed`. */
export const AuditEntry = Type.Object({
  id: Type.String({ format: 'uuid' }),
  occurred_at: Type.String({ format: 'date-time' }),
  actor: Type.String(),
  action: Type.String(),
  target_type: Type.String(),
  target_id: Type.String(),
  details: Type.Record(Type.String(), Type.Unknown()),
});
export type AuditEntryDto = Static<typeof AuditEntry>;

/**
 * `GET /admin/audit`: the platform's list shape (`listResponse` of `@codeagent/service-kit`:
 * items and `next_cursor`) except that docs/contract/spec.md §8.3 names the items `entries`.
 */
export const AuditPage = Type.Object({ entries: Type.Array(AuditEntry), next_cursor: Nullable(Type.String()) });
export type AuditPage = Static<typeof AuditPage>;

/** `GET /admin/audit`'s query: the platform's `limit` (1–1000, default 100) and `cursor`, and two filters. */
export const AuditQuery = Type.Composite([ListQuery, Type.Object({ target_id: Type.Optional(Type.String()), action: Type.Optional(Type.String()) })]);

const TOO_LARGE = new Set<ValueErrorType>([ValueErrorType.StringMaxLength, ValueErrorType.IntegerMaximum, ValueErrorType.NumberMaximum]);

function reasonOf(error: ValueError): string {
  const r = (error.schema as { reasons?: Reasons }).reasons;
  if (r === undefined) return error.message;
  if (error.value === undefined || error.value === null) return r.required ?? r.invalid;
  if (TOO_LARGE.has(error.type)) return r.tooLarge ?? r.invalid;
  return r.invalid;
}

/**
 * The schema's verdict on a request body as docs/contract/spec.md §8.2 `fields`: one reason per
 * field (the first the schema finds), `body` when it is not a JSON object (the fields are then
 * reported as absent). Empty when the body matches `ClusterBody`.
 */
export function clusterBodyFields(body: unknown): Record<string, string> {
  const fields: Record<string, string> = {};
  const isObject = typeof body === 'object' && body !== null && !Array.isArray(body);
  if (!isObject) fields.body = 'must be a JSON object';
  for (const error of Value.Errors(ClusterBody, isObject ? body : {})) {
    const field = error.path.split('/')[1] ?? 'body';
    fields[field] ??= reasonOf(error);
  }
  return fields;
}

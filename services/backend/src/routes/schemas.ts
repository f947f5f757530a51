import { Type } from '@sinclair/typebox';

/** Schemas of the public API: they validate requests, shape responses and make the OpenAPI document. */

export const ErrorBody = Type.Object(
  { error: Type.String(), message: Type.Optional(Type.String()), fields: Type.Optional(Type.Record(Type.String(), Type.String())) },
  { $id: 'Error', additionalProperties: true },
);

export const User = Type.Object(
  {
    id: Type.String({ format: 'uuid' }),
    email: Type.String(),
    name: Type.String(),
    platform_role_id: Type.String(),
    is_system_admin: Type.Boolean(),
    created_at: Type.String({ format: 'date-time' }),
    disabled_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
  },
  { $id: 'User' },
);

export const MemberRole = Type.Union([Type.Literal('admin'), Type.Literal('editor'), Type.Literal('viewer')]);

export const Workspace = Type.Object(
  {
    id: Type.String({ format: 'uuid' }),
    name: Type.String(),
    description: Type.String(),
    created_at: Type.String({ format: 'date-time' }),
    updated_at: Type.String({ format: 'date-time' }),
    deleted_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
    member_count: Type.Integer(),
  },
  { $id: 'Workspace' },
);

export const Member = Type.Object(
  {
    workspace_id: Type.String({ format: 'uuid' }),
    user_id: Type.String({ format: 'uuid' }),
    email: Type.String(),
    name: Type.String(),
    role: MemberRole,
    created_at: Type.String({ format: 'date-time' }),
    updated_at: Type.String({ format: 'date-time' }),
  },
  { $id: 'Member' },
);

export const Email = Type.String({ format: 'email', minLength: 3, maxLength: 320 });
export const Password = Type.String({ minLength: 8, maxLength: 1024 });
export const Name = Type.String({ minLength: 1, maxLength: 200 });

/** Error responses, by status, for the OpenAPI document. */
export function errors(...statuses: number[]): Record<number, typeof ErrorBody> {
  return Object.fromEntries(statuses.map((s) => [s, ErrorBody]));
}

import { Type } from '@sinclair/typebox';

/** Schemas of the public API: they validate requests, shape responses and make the OpenAPI document. */

export const ErrorBody = Type.Object(
  { error: Type.String(), message: Type.Optional(Type.String()), fields: Type.Optional(Type.Record(Type.String(), Type.String())) },
  { $id: 'Error', additionalProperties: true },
);

// The records the API answers with live beside the domain that builds them; the DTO types are their `Static<>`.
export { Member, MemberRole, User, Workspace } from '../domain/schemas.js';

export const Email = Type.String({ format: 'email', minLength: 3, maxLength: 320 });
export const Password = Type.String({ minLength: 8, maxLength: 1024 });
export const Name = Type.String({ minLength: 1, maxLength: 200 });

/** Error responses, by status, for the OpenAPI document. */
export function errors(...statuses: number[]): Record<number, typeof ErrorBody> {
  return Object.fromEntries(statuses.map((s) => [s, ErrorBody]));
}

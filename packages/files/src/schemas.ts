import { Type, type Static, type TSchema } from '@sinclair/typebox';

/**
 * What the files of a workspace answer (docs/contract/spec.md §4.3), as TypeBox schemas: the
 * backend's routes declare them as their responses, and the DTO types below are their
 * `Static<>`. They live here, beside the code that builds the records, because a package may
 * not import a service (docs/decisions/0096); the backend imports them from `@codeagent/files`.
 */
const Nullable = <T extends TSchema>(t: T) => Type.Union([t, Type.Null()]);

/** An object: `{"path","size","sha256","content_type","version_id","updated_at","updated_by"}`. */
export const ObjectSchema = Type.Object(
  {
    path: Type.String(),
    size: Type.Integer(),
    sha256: Type.String(),
    content_type: Type.String(),
    version_id: Type.String({ format: 'uuid' }),
    updated_at: Type.String({ format: 'date-time' }),
    updated_by: Nullable(Type.String()),
  },
  { $id: 'Object' },
);
export type ObjectDto = Static<typeof ObjectSchema>;

/** One version of a path; `current` marks the live content. */
export const VersionSchema = Type.Object({
  version_id: Type.String({ format: 'uuid' }),
  size: Type.Integer(),
  sha256: Type.String(),
  content_type: Type.String(),
  created_at: Type.String({ format: 'date-time' }),
  created_by: Nullable(Type.String()),
  current: Type.Boolean(),
});
export type VersionDto = Static<typeof VersionSchema>;

/** A trash item: `{"id","path","size","deleted_at","deleted_by"}`. */
export const TrashItemSchema = Type.Object({
  id: Type.String({ format: 'uuid' }),
  path: Type.String(),
  size: Type.Integer(),
  deleted_at: Type.String({ format: 'date-time' }),
  deleted_by: Nullable(Type.String()),
});
export type TrashItemDto = Static<typeof TrashItemSchema>;

/** A folder of the WebDAV tree: a prefix that objects live under (folders are not stored). */
export const FolderSchema = Type.Object({
  /** The folder's own name (one segment). */
  name: Type.String(),
  /** The newest change of an object under it. */
  updated_at: Type.String({ format: 'date-time' }),
});
export type FolderDto = Static<typeof FolderSchema>;

/**
 * A folder in a listing by `delimiter=/` (decision 0199): the prefix its objects share, up to and
 * with the delimiter (as S3's common prefixes), and how many objects lie anywhere under it,
 * counted up to FOLDER_COUNT_LIMIT.
 */
export const ListedFolderSchema = Type.Object({
  /** The folder's prefix, ending in `/`: the `prefix` to list it by. */
  path: Type.String(),
  /** The objects under it, at most FOLDER_COUNT_LIMIT. */
  object_count: Type.Integer(),
  /** true when it holds more objects than `object_count` (the count stopped at its limit). */
  object_count_capped: Type.Boolean(),
});
export type ListedFolderDto = Static<typeof ListedFolderSchema>;

import createClient from 'openapi-fetch';
import type { components, paths } from './schema';
import { encodePath } from '../nav';

/**
 * The API client, typed from the backend's OpenAPI document (schema.d.ts is generated, never
 * edited). Requests carry the HttpOnly session cookie (same origin); no token is ever kept in
 * script-readable storage. Browsers add `Sec-Fetch-Site: same-origin`, which is what the
 * backend's same-origin rule for cookie-authenticated writes checks.
 */
export const api = createClient<paths>({
  baseUrl: '',
  credentials: 'same-origin',
  // `{*}` is an object path: its slashes stay separators, each segment is encoded.
  pathSerializer: (pathname, params) =>
    pathname.replace(/\{([^{}]+)\}/g, (match, name: string) => {
      const value = params[name];
      if (value === undefined || value === null) return match;
      // eslint-disable-next-line @typescript-eslint/no-base-to-string -- path parameters are strings and numbers (the generated schema)
      return name === '*' ? encodePath(String(value)) : encodeURIComponent(String(value));
    }),
});

export type Schemas = components['schemas'];
type Json<P extends keyof paths, M extends keyof paths[P]> = paths[P][M] extends { responses: { 200: { content: { 'application/json': infer T } } } }
  ? T
  : never;
export type Me = Json<'/api/v1/auth/me', 'get'>;
export type ObjectList = Json<'/api/v1/data-resources/{ws}/objects', 'get'>;
export type StoredObject = ObjectList['items'][number];
export type ListedFolder = NonNullable<ObjectList['folders']>[number];
/**
 * The object an empty folder is kept as (services/backend/src/domain/dav.ts, decision 0070): the
 * REST API lists it like any object; the web app shows it as the folder it keeps.
 */
export const FOLDER_MARKER = '.codeagent-folder';

/** The folder (`a/b`) whose marker `path` is, or undefined when `path` is not a folder's marker. */
export const markedFolder = (path: string): string | undefined => (path.endsWith(`/${FOLDER_MARKER}`) ? path.slice(0, -FOLDER_MARKER.length - 1) : undefined);

export type TrashList = Json<'/api/v1/data-resources/{ws}/trash', 'get'>;
export type TrashItem = TrashList['items'][number];
export type VersionList = Json<'/api/v1/data-resources/{ws}/versions/{*}', 'get'>;
export type VersionItem = VersionList['items'][number];
export type RunList = Json<'/api/v1/workspaces/{ws}/runs', 'get'>;
export type Run = RunList['items'][number];
export type ScheduleList = Json<'/api/v1/workspaces/{ws}/schedules', 'get'>;
export type Schedule = ScheduleList['items'][number];
export type UserList = Json<'/api/v1/platform/users', 'get'>;
export type User = UserList['items'][number];
export type WorkspaceList = Json<'/api/v1/platform/workspaces', 'get'>;
export type Workspace = WorkspaceList['items'][number];
export type MemberList = Json<'/api/v1/platform/workspaces/{id}/members', 'get'>;
export type WorkspaceMemberList = Json<'/api/v1/workspaces/{ws}/members', 'get'>;
export type Member = MemberList['items'][number];

/** The error body of every failure (docs/contract/spec.md §3). */
export interface ApiError {
  error: string;
  message?: string;
  fields?: Record<string, string>;
}

const WORDS: Record<string, string> = {
  invalid_credentials: 'Wrong email or password.',
  too_many_requests: 'Too many attempts. Wait a minute, then try again.',
  unauthorized: 'Your session has ended. Log in again.',
  forbidden: 'Your role does not allow this. Ask a workspace admin.',
  not_found: 'Not found: it may have been deleted or moved.',
  conflict: 'That already exists (or changed meanwhile). Reload and try again.',
  last_admin: 'Refused: this is the last admin of the workspace. Make another member admin first.',
  self_removal: 'Refused: you cannot remove yourself. Ask another system administrator.',
  payload_too_large: 'The file is larger than this platform accepts (MAX_UPLOAD_BYTES).',
  quota_exceeded: "The workspace's storage quota is full. Delete or purge files first.",
};

/** A sentence for people, naming what to do next, from an API error body (or anything thrown). */
export function describeError(err: unknown): string {
  if (err && typeof err === 'object' && 'error' in err) {
    const e = err as ApiError;
    const words = WORDS[e.error];
    if (words && e.error !== 'invalid_request' && e.error !== 'conflict') return words;
    if (e.message)
      return (
        e.message +
        (e.fields
          ? ` (${Object.entries(e.fields)
              .map(([k, v]) => `${k}: ${v}`)
              .join('; ')})`
          : '')
      );
    return words ?? `The server refused: ${e.error}.`;
  }
  if (err instanceof Error) return err.message;
  return 'Something went wrong. Reload the page and try again.';
}

/** The URL of an object's content (download links), or of one of its versions. */
/** A folder (`a/b/`; '' for the whole workspace) as one zip file to download (decision 0226). */
export function archiveUrl(ws: string, prefix: string): string {
  return `/api/v1/data-resources/${encodeURIComponent(ws)}/archive${prefix === '' ? '' : `?prefix=${encodeURIComponent(prefix)}`}`;
}

export function objectUrl(ws: string, path: string, versionId?: string): string {
  const base = `/api/v1/data-resources/${encodeURIComponent(ws)}`;
  const p = encodePath(path);
  return versionId ? `${base}/versions/${p}?version_id=${encodeURIComponent(versionId)}` : `${base}/objects/${p}`;
}

import { InvalidPathError, validateObjectPath } from '@codeagent/storage';
import type { ObjectDto } from '@codeagent/files';
import { BadRequestError, ambiguousPathReason } from '@codeagent/service-kit';

/**
 * The rules of the WebDAV tree (docs/decisions/0070-webdav-tree.md) as plain functions: request
 * paths to object paths, the Destination header, and the 207 Multi-Status document. The route
 * (`routes/dav.ts`) maps them to HTTP.
 */

/** Where the tree is served: `${DAV_PREFIX}/{workspace_id}/{path}`. */
export const DAV_PREFIX = '/api/v1/dav';

/** The methods of the tree (DAV class 1: no LOCK). */
export const DAV_METHODS = ['OPTIONS', 'PROPFIND', 'GET', 'HEAD', 'PUT', 'DELETE', 'MKCOL', 'COPY', 'MOVE'] as const;
/** Methods clients send that the tree refuses with 405 (no dead properties, no locks). */
export const DAV_REFUSED_METHODS = ['PROPPATCH', 'LOCK', 'UNLOCK'] as const;

/**
 * The empty object MKCOL stores so that an empty folder exists (folders are prefixes). The tree
 * hides it; the REST API shows it like any object.
 */
export const FOLDER_MARKER = '.codeagent-folder';

/**
 * Refuses (400) an upload to the marker's name: only MKCOL stores it, empty. Written with content
 * by a client, it was hidden from the WebDAV tree and from zips while its bytes counted (hostile
 * review): a member could park data the other members' mounts never show.
 */
export function refuseMarkerName(path: string): void {
  if (path === FOLDER_MARKER || path.endsWith(`/${FOLDER_MARKER}`)) {
    throw new BadRequestError(
      `${FOLDER_MARKER} is the name the platform gives an empty folder's marker; store the file under another name (a folder is made with MKCOL, or by storing a file in it)`,
      {
        path: 'reserved name',
      },
    );
  }
}

/** The paths of a workspace: '' is its root folder. */
export interface DavTarget {
  workspace: string;
  /** The object path, or '' for the workspace root. */
  path: string;
}

/**
 * Splits the path part of a request target below DAV_PREFIX into the workspace and the object
 * path, decoding each segment once. Refused (InvalidPathError): dot segments in any encoding,
 * backslashes, an encoded `/` inside a segment (it would name another path than the one the
 * client sees), malformed escapes, and anything the one object-path rule refuses. One trailing
 * `/` (a folder's href) is allowed.
 */
export function parseDavPath(urlPath: string): DavTarget | undefined {
  const base = `${DAV_PREFIX}/`;
  if (!urlPath.startsWith(base)) return undefined;
  const problem = ambiguousPathReason(urlPath);
  if (problem !== undefined) throw new InvalidPathError(urlPath, problem);
  let rest = urlPath.slice(base.length);
  const slash = rest.indexOf('/');
  // (Lower case, as everywhere: storage and lock keys are made of the id.)
  const workspace = decodeSegment(slash === -1 ? rest : rest.slice(0, slash), urlPath).toLowerCase();
  rest = slash === -1 ? '' : rest.slice(slash + 1);
  if (rest.endsWith('/')) rest = rest.slice(0, -1);
  if (rest === '') return { workspace, path: '' };
  const path = rest
    .split('/')
    .map((segment) => decodeSegment(segment, urlPath))
    .join('/');
  return { workspace, path: validateObjectPath(path) };
}

function decodeSegment(segment: string, whole: string): string {
  let decoded: string;
  try {
    decoded = decodeURIComponent(segment);
  } catch {
    throw new InvalidPathError(whole, 'has a malformed percent-escape');
  }
  if (decoded.includes('/')) throw new InvalidPathError(whole, 'must not contain an encoded / inside a name');
  return decoded;
}

export type DestinationProblem = 'malformed' | 'other_server';

/**
 * The Destination header of COPY and MOVE (RFC 4918 §10.3): an absolute URL or an absolute
 * path. An absolute URL must name this server (`host` as the client addressed it). Returns the
 * target, or the problem.
 */
export function parseDestination(header: string | undefined, host: string): DavTarget | DestinationProblem {
  if (typeof header !== 'string' || header === '') return 'malformed';
  let path = header;
  const scheme = /^https?:\/\/([^/?#]*)/i.exec(header);
  if (scheme) {
    // A URL that does not parse (`http://[::1/x`) names no server at all.
    if (!URL.canParse(header)) return 'malformed';
    const authority = scheme[1]!.replace(/^[^@]*@/, '');
    if (authority.toLowerCase() !== host.toLowerCase()) return 'other_server';
    path = header.slice(scheme[0].length) || '/';
  }
  if (!path.startsWith('/') || /[?#]/.test(path)) return 'malformed';
  const target = parseDavPath(path);
  return target ?? 'malformed';
}

/** Whether `inner` is `outer` or lies under it ('' is the root and contains everything). */
export function isWithin(inner: string, outer: string): boolean {
  return outer === '' || inner === outer || inner.startsWith(`${outer}/`);
}

/** The href of a resource: each segment percent-encoded, folders with a trailing `/`. */
export function davHref(workspace: string, path: string, folder: boolean): string {
  const encoded = path === '' ? '' : path.split('/').map(encodeURIComponent).join('/');
  if (encoded === '') return `${DAV_PREFIX}/${workspace}/`;
  return `${DAV_PREFIX}/${workspace}/${encoded}${folder ? '/' : ''}`;
}

export interface DavEntry {
  href: string;
  name: string;
  folder: boolean;
  updatedAt: string;
  object?: ObjectDto;
}

const XML_ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&apos;' };

/**
 * The modification time a mount client gives a file it uploads (`X-OC-Mtime`: Unix seconds, as
 * ownCloud's clients and rclone's owncloud vendor send it; decision 0220), or undefined when there
 * is none or it is not a time. A time after `now` is taken as `now`: a member cannot give a file
 * a future time that every later change would be older than.
 */
export function clientModTime(header: string | string[] | undefined, now = new Date()): Date | undefined {
  if (typeof header !== 'string' || !/^\d{1,11}(\.\d{1,9})?$/.test(header.trim())) return undefined;
  const ms = Math.floor(Number(header.trim()) * 1000);
  return new Date(Math.min(ms, now.getTime()));
}

export function xmlEscape(text: string): string {
  return text.replace(/[&<>"']/g, (c) => XML_ESCAPES[c]!);
}

function entryXml(e: DavEntry): string {
  const props = [
    `<D:displayname>${xmlEscape(e.name)}</D:displayname>`,
    e.folder ? '<D:resourcetype><D:collection/></D:resourcetype>' : '<D:resourcetype/>',
    `<D:getlastmodified>${new Date(e.updatedAt).toUTCString()}</D:getlastmodified>`,
  ];
  if (e.object) {
    props.push(
      `<D:getcontentlength>${e.object.size}</D:getcontentlength>`,
      `<D:getcontenttype>${xmlEscape(e.object.content_type)}</D:getcontenttype>`,
      `<D:getetag>"${e.object.sha256}"</D:getetag>`,
    );
  }
  return `<D:response><D:href>${xmlEscape(e.href)}</D:href><D:propstat><D:prop>${props.join('')}</D:prop><D:status>HTTP/1.1 200 OK</D:status></D:propstat></D:response>`;
}

/** The 207 Multi-Status body of a PROPFIND: the live properties of every entry (allprop). */
export function multistatus(entries: readonly DavEntry[]): string {
  return `<?xml version="1.0" encoding="utf-8"?>\n<D:multistatus xmlns:D="DAV:">${entries.map(entryXml).join('')}</D:multistatus>\n`;
}

/** An RFC 4918 §16 precondition failure body, e.g. `propfind-finite-depth`. */
export function davError(condition: string): string {
  return `<?xml version="1.0" encoding="utf-8"?>\n<D:error xmlns:D="DAV:"><D:${condition}/></D:error>\n`;
}

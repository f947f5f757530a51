import type { IncomingHttpHeaders } from 'node:http';
import { ForbiddenError } from '@codeagent/service-kit';
import { mediaTypeOf, normalizeContentType } from '@codeagent/storage';

/**
 * Types a browser may show inline from the platform's origin (docs/contract/spec.md §4.5): raster images, PDF and
 * plain text, none of which runs script. Everything else (HTML, SVG, XML, JavaScript, …) is
 * served as an attachment.
 */
const SAFE_INLINE = new Set(['image/png', 'image/jpeg', 'image/gif', 'image/webp', 'application/pdf', 'text/plain']);

export function isSafeInline(contentType: string): boolean {
  const type = mediaTypeOf(contentType);
  return type !== undefined && SAFE_INLINE.has(type);
}

// RFC 5987 attr-char: ALPHA / DIGIT / "!#$&+-.^_`|~"; encodeURIComponent leaves '()*' and "'" too.
const encodeRfc5987 = (value: string) => encodeURIComponent(value).replace(/['()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);

/**
 * `Content-Disposition` with a safe filename (RFC 6266): an ASCII fallback in `filename` (no
 * quote, backslash, percent sign or non-ASCII character, each replaced by `_`) and the exact
 * UTF-8 name in `filename*`.
 */
export function contentDisposition(kind: 'inline' | 'attachment', filename: string): string {
  const fallback = filename.replace(/[^\x20-\x7e]|["\\%]/g, '_');
  return `${kind}; filename="${fallback}"; filename*=UTF-8''${encodeRfc5987(filename)}`;
}

/**
 * Headers of object content (GET and HEAD of objects, GET of a version): the stored type (checked
 * again, for rows stored before types were normalised), never sniffed, sandboxed so that even a
 * document opened directly runs no script in the platform's origin, and an attachment unless the
 * type is on the safe inline list.
 */
export function objectContentHeaders(path: string, storedType: string): Record<string, string> {
  const contentType = normalizeContentType(path, storedType);
  const name = path.slice(path.lastIndexOf('/') + 1);
  return {
    'content-type': contentType,
    'x-content-type-options': 'nosniff',
    'content-security-policy': 'sandbox',
    'content-disposition': contentDisposition(isSafeInline(contentType) ? 'inline' : 'attachment', name),
    // User data behind a login: no shared cache may keep it; browsers revalidate with the ETag.
    'cache-control': 'private, no-cache',
  };
}

/**
 * Fetch Metadata destinations that would run the answer as code of the page that asked: a
 * `<script src>`, a worker, an XSLT sheet. Object content is never code of the platform's
 * origin, whatever its stored type (a `.js` object is `text/javascript`, and a page whose CSP
 * allows `'self'` would run it): such a request is refused before anything is read (decision 0245).
 */
const CODE_DESTINATIONS = new Set(['script', 'worker', 'sharedworker', 'serviceworker', 'audioworklet', 'paintworklet', 'xslt']);

export function refuseAsCode(headers: IncomingHttpHeaders): void {
  const dest = headers['sec-fetch-dest'];
  if (typeof dest === 'string' && CODE_DESTINATIONS.has(dest.trim().toLowerCase()))
    throw new ForbiddenError(`object content is never loaded as ${dest.trim().toLowerCase()}: download it or open it as a document`);
}

/**
 * The WebDAV methods (RFC 4918) that Fastify does not know by itself. The backend serves the
 * tree under /api/v1/dav (PROPPATCH, LOCK and UNLOCK answer 405: the tree is DAV class 1 with
 * live properties only) and the gateway passes them there; both register them with
 * `app.addHttpMethod(method, { hasBody: true })` (RFC 4918 allows a body on each).
 */
export const WEBDAV_EXTRA_METHODS = ['PROPFIND', 'PROPPATCH', 'MKCOL', 'COPY', 'MOVE', 'LOCK', 'UNLOCK'] as const;

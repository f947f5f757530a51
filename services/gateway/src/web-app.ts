import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { extname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { landingCsp, landingPage } from './landing.js';
import { asAppPage, pageCsp } from './security-headers.js';

/**
 * The platform's web app at `/` (issue 16, docs/decisions/0111): a Vite build in `web/dist/app`,
 * `index.html` plus content-hashed files under `/assets/`. One table of what is served, used by
 * the gateway (`registerWebApp`) and by the nginx rendering (`nginx.ts`), so both answer alike:
 *
 * - `/` and the app's own paths (`APP_PATHS`, exactly and below): index.html, `no-cache`, the
 *   page CSP (no inline script), `frame-ancestors 'self'`. Every other unknown path stays a 404
 *   JSON answer: the SPA fallback never covers `/api`, `/internal`, `/jupyter`, `/mcp`, `/admin`.
 * - `/assets/{name}`: the file, `Cache-Control: public, max-age=31536000, immutable` (its name
 *   changes with its content); a missing asset is a 404, never index.html.
 */
export const APP_PATHS = ['/login', '/workspaces', '/manage', '/account'] as const;
export const ASSETS_PREFIX = '/assets';
export const ASSET_CACHE_CONTROL = 'public, max-age=31536000, immutable';
export const INDEX_CACHE_CONTROL = 'no-cache';
/** The app's pages: scripts and styles from files of the platform's origin only. */
export const WEB_APP_CSP = pageCsp();
/** Content types of what Vite emits (anything else: octet-stream, and nosniff keeps it inert). */
export const ASSET_TYPES: Readonly<Record<string, string>> = {
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.woff2': 'font/woff2',
  '.json': 'application/json',
  '.map': 'application/json',
};
/** An asset name as Vite writes them: no directory, no dot segment. */
const ASSET_NAME = /^[A-Za-z0-9_-][A-Za-z0-9._-]*$/;

/** Where `node web/build.mjs` puts the app, from this file's place (src/ or dist/ of the gateway). */
export function defaultWebRoot(): string {
  return resolve(fileURLToPath(new URL('.', import.meta.url)), '../../../web/dist/app');
}

/** The directory holds a built app (else the start page stays, and says how to build). */
export function webAppBuilt(root: string | undefined): root is string {
  return root !== undefined && existsSync(join(root, 'index.html'));
}

/** The start page without a built app: what to run. */
export const notBuiltPage = (): string => NOT_BUILT;
const NOT_BUILT = landingPage.replace(
  '<p>The platform is running.</p>',
  '<p>The platform is running. The web app is not built: run <code>npm run build</code> (or <code>node web/build.mjs</code>) and reload.</p>',
);

/**
 * Serves the web app from `root` (GET and HEAD; other methods 405 through the not-found handler).
 * Without a root (tests of the routing alone) nothing: the route table's pages serve `/` and `/login`.
 */
export function registerWebApp(app: FastifyInstance, root: string | undefined): void {
  // Without a root the route table's pages answer `/` and `/login` (routes.ts).
  if (root === undefined) return;
  const index = async (_req: unknown, reply: FastifyReply) => {
    asAppPage(reply, webAppBuilt(root) ? WEB_APP_CSP : landingCsp)
      .header('cache-control', INDEX_CACHE_CONTROL)
      .type('text/html; charset=utf-8');
    // Read per request (half a kilobyte): a rebuild is served without a restart.
    const html = await readFile(join(root, 'index.html')).catch(() => undefined);
    return reply.send(html ?? NOT_BUILT);
  };
  app.get('/', index);
  for (const path of APP_PATHS) {
    app.get(path, index);
    app.get(`${path}/*`, index);
  }
  app.get(`${ASSETS_PREFIX}/:name`, async (req, reply) => {
    const { name } = req.params as { name: string };
    const body = ASSET_NAME.test(name) ? await readFile(join(root, 'assets', name)).catch(() => undefined) : undefined;
    if (body === undefined) return reply.code(404).send({ error: 'not_found', message: 'no such asset: reload the page (the app may have been rebuilt)' });
    return reply
      .header('cache-control', ASSET_CACHE_CONTROL)
      .type(ASSET_TYPES[extname(name)] ?? 'application/octet-stream')
      .send(body);
  });
}

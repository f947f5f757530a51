import { APP_PATHS, ASSETS_PREFIX, ASSET_CACHE_CONTROL, ASSET_TYPES, INDEX_CACHE_CONTROL, WEB_APP_CSP, notBuiltPage, webAppBuilt } from './web-app.js';
import { landingCsp } from './landing.js';

/** What nginx.ts lends the rendering (its quoting and header blocks), so both stay one rule. */
export interface NginxHelpers {
  securityHeaders: (csp: boolean) => string[];
  notFound: (body: Record<string, unknown>) => string[];
  q: (text: string) => string;
  indent: (lines: string[]) => string[];
}

/**
 * The web app's locations in the nginx configuration, the same answers as `registerWebApp`:
 * index.html (no-cache, page CSP) at `/` and the app's paths, hashed assets immutable, anything
 * else under /assets a 404 JSON answer, never index.html. Without a build: the start page that
 * says how to build (render the configuration again afterwards).
 */
export function webAppLocations(webRoot: string, h: NginxHelpers): string[] {
  const root = webRoot.replace(/\/+$/, '');
  const built = webAppBuilt(root);
  const onlyGetHead = ['if ($request_method !~ ^(GET|HEAD)$) {', '  rewrite ^ /_codeagent/method-not-allowed last;', '}'];
  const page = [
    ...onlyGetHead,
    ...h.securityHeaders(false),
    `add_header Content-Security-Policy ${h.q(built ? WEB_APP_CSP : landingCsp)} always;`,
    'add_header X-Frame-Options SAMEORIGIN always;',
    `add_header Cache-Control ${h.q(INDEX_CACHE_CONTROL)} always;`,
    'types { }',
    'default_type "text/html; charset=utf-8";',
    ...(built ? [`root ${h.q(root)};`, 'try_files /index.html =404;'] : [`return 200 ${h.q(notBuiltPage())};`]),
  ];
  const out: string[] = [];
  const block = (head: string, body: string[]) => out.push(`location ${head} {`, ...h.indent(body), '}');
  block('= /', page);
  for (const path of APP_PATHS) {
    block(`= ${path}`, page);
    block(`${path}/`, page);
  }
  const types = Object.entries(ASSET_TYPES).map(([ext, type]) => `${type.split(';')[0]} ${ext.slice(1)};`);
  // Only names as Vite writes them (no directory); everything else under /assets is a 404.
  block(`~ ^${ASSETS_PREFIX}/[A-Za-z0-9_-][A-Za-z0-9._-]*$`, [
    ...onlyGetHead,
    ...h.securityHeaders(true),
    `add_header Cache-Control ${h.q(ASSET_CACHE_CONTROL)} always;`,
    `types { ${types.join(' ')} }`,
    'default_type application/octet-stream;',
    'charset utf-8;',
    'charset_types text/javascript text/css;',
    `root ${h.q(root)};`,
    'try_files $uri @codeagent_no_asset;',
  ]);
  block(`${ASSETS_PREFIX}/`, h.notFound({ error: 'not_found', message: 'no such asset: reload the page (the app may have been rebuilt)' }));
  block('@codeagent_no_asset', h.notFound({ error: 'not_found', message: 'no such asset: reload the page (the app may have been rebuilt)' }));
  return out;
}

/**
 * What the browser gets from a workspace's JupyterLab, whatever its Jupyter server says
 * (decision 0245). The server runs in the workspace's sandbox with the same uid as the
 * workspace's kernels, so user code can stop it and answer on its socket itself: nothing it
 * answers may run as script in the platform's origin. So:
 *
 * - JupyterLab's own scripts, styles and themes come from the installed files, here, never from
 *   the server (`/static/codeagent_lab/…`, `/lab/extensions/…`, `/lab/api/themes/…`);
 * - JupyterLab's pages (`/lab…`) carry a CSP whose scripts are those paths only: no inline
 *   script, no script of any other path of the origin (a file a member wrote, a download);
 *   `'unsafe-eval'` stays because JupyterLab compiles its settings' JSON schemas (ajv), so what
 *   is compiled comes from here too: the settings' schemas are replaced by the installed ones,
 *   and the translations (a language pack's plural rule is compiled as code) are answered here;
 * - every other answer of the server is a document without the platform's origin (`sandbox`
 *   added as a policy of its own, which no flag of the server's can widen), never a script (a
 *   JavaScript type is answered as text), and carries only the headers that describe its content
 *   (no cookie, no `Clear-Site-Data`, no redirect out of the lab); relay.ts rebuilds websocket
 *   handshake answers the same way.
 *
 * No database and no framework (json5 aside): `codeagent jupyterlab` (the CLI's one lab) uses it too;
 * the users' own settings and layouts come from a store it is given (lab-state.ts).
 */
import { createReadStream, readdirSync, readFileSync } from 'node:fs';
import { stat } from 'node:fs/promises';
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import { dirname, extname, join } from 'node:path';
import JSON5 from 'json5';
import type { LabStateStore, StoredLabText } from './lab-state.js';
import type { AnswerCheck } from './relay.js';

/** The JupyterLab host's installed files: `extensions/lab-host` and the prebuilt extensions' directory. */
export interface LabFiles {
  hostDir: string;
  extensionsDir?: string | undefined;
}

/** jupyterlab_server's static path of the host's app (`name` in extensions/lab-host/main.py). */
export const LAB_STATIC = '/static/codeagent_lab/';
export const LAB_EXTENSIONS = '/lab/extensions/';
const LAB_THEMES = '/lab/api/themes/';
const LAB_TRANSLATIONS = '/lab/api/translations';
const LAB_SETTINGS = /^\/lab\/api\/settings(?:\/(.*))?$/;
/** The settings plugin whose `locale` names the translations JupyterLab loads. */
const TRANSLATION_PLUGIN = '@jupyterlab/translation-extension:plugin';
/** A locale as language packs name them (`fr_FR`, `zh-Hans`). */
const LOCALE = /^[A-Za-z]{2,8}(?:[_-][A-Za-z0-9]{1,8}){0,3}$/;

/** A path segment of an installed file: no dot segment, no hidden file, nothing to escape. */
const SEGMENT = '[A-Za-z0-9_@-][A-Za-z0-9._@-]*';
const FILE_PATH = new RegExp(`^${SEGMENT}(?:/${SEGMENT})*$`);

const FILE_TYPES: Readonly<Record<string, string>> = {
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json',
  '.map': 'application/json',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.gif': 'image/gif',
  '.woff': 'font/woff',
  '.woff2': 'font/woff2',
  '.ttf': 'font/ttf',
  '.eot': 'application/vnd.ms-fontobject',
  '.txt': 'text/plain; charset=utf-8',
};
/** A name with webpack's content hash changes with its content. */
const HASHED = /[.-][0-9a-f]{16,}\./;

/**
 * The path as a browser compares it with a CSP source (each `%XX` decoded; any byte, so a
 * sequence that is not UTF-8 cannot hide a `/`), lower-cased: every spelling of the script paths.
 */
const comparable = (path: string) =>
  (path.includes('%') ? path.replace(/%([0-9a-fA-F]{2})/g, (_, hex: string) => String.fromCharCode(parseInt(hex, 16))) : path).toLowerCase();

/**
 * What the trusted side answers for a lab path: one of JupyterLab's installed files (`file`
 * undefined when no such file: 404), its translations, its page; undefined for the server's
 * paths. Any spelling of the paths the page's CSP allows scripts from is answered here, never by
 * the server (a redirect there would take a script from anywhere in the origin).
 */
function ownPath(
  path: string,
  files: LabFiles,
): { kind: 'file'; file: string | undefined } | { kind: 'translations' } | { kind: 'page'; notFound: boolean } | undefined {
  const plain = comparable(path);
  const under = (prefix: string, dir: string | undefined, allowed: (rel: string) => boolean) => {
    const rel = path.slice(prefix.length);
    return { kind: 'file' as const, file: path.startsWith(prefix) && dir !== undefined && FILE_PATH.test(rel) && allowed(rel) ? join(dir, rel) : undefined };
  };
  if (plain.startsWith(LAB_STATIC)) return under(LAB_STATIC, join(files.hostDir, 'build', 'static'), (rel) => !rel.includes('/') && extname(rel) !== '.html');
  // A prebuilt extension's own files only: `<name or @scope/name>/static/…`.
  if (plain.startsWith(LAB_EXTENSIONS)) return under(LAB_EXTENSIONS, files.extensionsDir, (rel) => /^(?:@[^/]+\/)?[^/@]+\/static\//.test(rel));
  if (plain.startsWith(LAB_THEMES)) return under(LAB_THEMES, join(files.hostDir, 'build', 'themes'), () => true);
  // JupyterLab fetches `<translations URL>` joined with the locale, a user setting (the server's
  // data), and checks only that the result starts with that URL: `../translations-x` passes.
  if (plain.startsWith(LAB_TRANSLATIONS)) return { kind: 'translations' };
  if (LAB_PAGE.test(path)) return { kind: 'page', notFound: false };
  // jupyterlab_server's fallthrough: any other path of the app is its page, which says "not found".
  if (/^\/(?:lab|doc)(?:\/|$)/.test(plain) && !plain.startsWith('/lab/api/')) return { kind: 'page', notFound: true };
  return undefined;
}

const jsonAnswer = (res: ServerResponse, status: number, body: unknown) => {
  res
    .writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store', 'content-security-policy': 'sandbox' })
    .end(JSON.stringify(body));
};

/** An error answer before the request's body was read (which is let go). */
function refuse(req: IncomingMessage, res: ServerResponse, status: number, message: string): void {
  req.resume();
  jsonAnswer(res, status, { message });
}

/**
 * Answers the lab paths that are the trusted side's own (JupyterLab's pages, its installed
 * files, translations) and says true; false for a path the server answers. `rest` is the path
 * after the lab's base (`/jupyter/<workspace>` or `/jupyter`), query included.
 */
export function answerOwnLabPath(req: IncomingMessage, res: ServerResponse, rest: string, files: LabFiles, ctx: LabPageContext): boolean {
  const [path, query] = splitQuery(rest);
  const own = ownPath(path, files);
  if (own === undefined) return false;
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    res
      .writeHead(405, { allow: 'GET, HEAD', 'content-type': 'application/json; charset=utf-8', 'content-security-policy': 'sandbox' })
      .end(JSON.stringify({ message: 'JupyterLab files are read-only' }));
    return true;
  }
  req.resume();
  if (own.kind === 'page') {
    if (path.length > 1 && path.endsWith('/')) {
      // jupyterlab_server's own rule (`removeslash`), to a path of this lab only.
      res
        .writeHead(302, { location: `${ctx.base}${path.slice(1).replace(/\/+$/, '')}${query === undefined ? '' : `?${query}`}`, 'cache-control': 'no-store' })
        .end();
      return true;
    }
    const html = labPage(path, files, ctx, own.notFound);
    if (html === undefined) {
      jsonAnswer(res, 503, { message: 'the JupyterLab host is not built: run `node extensions/build.mjs`' });
      return true;
    }
    res.writeHead(200, {
      'content-type': 'text/html; charset=utf-8',
      'cache-control': 'no-store',
      'content-security-policy': labPageCsp(browserOrigin(req.headers), ctx.base, ctx.ownOrigin),
      'x-content-type-options': 'nosniff',
    });
    res.end(req.method === 'HEAD' ? undefined : html);
    return true;
  }
  if (own.kind === 'translations') {
    // No language pack is installed: English only, as jupyterlab_server answers without one.
    const locale = decodeSafely(path.slice(LAB_TRANSLATIONS.length + 1));
    if (path.length <= LAB_TRANSLATIONS.length + 1) jsonAnswer(res, 200, { data: { en: { displayName: 'English', nativeName: 'English' } }, message: '' });
    else jsonAnswer(res, 200, { data: {}, message: LOCALE.test(locale) ? `Language pack '${locale}' not installed!` : 'No such language pack.' });
    return true;
  }
  const file = own.file;
  if (file === undefined) {
    jsonAnswer(res, 404, { message: 'no such JupyterLab file' });
    return true;
  }
  stat(file).then(
    (st) => {
      if (!st.isFile()) return jsonAnswer(res, 404, { message: 'no such JupyterLab file' });
      sendFile(req, res, file, st.size);
    },
    () => jsonAnswer(res, 404, { message: 'no such JupyterLab file' }),
  );
  return true;
}

/** One installed file, streamed. */
function sendFile(req: IncomingMessage, res: ServerResponse, file: string, size: number): void {
  res.writeHead(200, {
    'content-type': FILE_TYPES[extname(file)] ?? 'application/octet-stream',
    'content-length': size,
    'cache-control': HASHED.test(file) ? 'public, max-age=31536000, immutable' : 'no-cache',
    'x-content-type-options': 'nosniff',
  });
  if (req.method === 'HEAD') {
    res.end();
    return;
  }
  const stream = createReadStream(file);
  stream.on('error', () => res.destroy());
  res.on('close', () => stream.destroy());
  stream.pipe(res);
}

/** JupyterLab's pages (jupyterlab_server's `LabHandler` routes): the app, a named workspace, a file. */
const LAB_PAGE = /^\/(lab|doc)(\/workspaces\/[A-Za-z0-9_-]+)?(\/tree\/.*)?$/;

/** Where a sandboxed server sees the host and the prebuilt extensions (read-only; servers.ts, cli/src/jupyterlab.ts). */
export const SANDBOX_LAB_DIR = '/opt/codeagent/lab-host';
export const SANDBOX_EXTENSIONS_DIR = '/opt/codeagent/labextensions';

/** What a page needs to know about the server it talks to. */
export interface LabPageContext {
  /** The lab's base path with its trailing slash: `/jupyter/<workspace>/` or `/jupyter/`. */
  base: string;
  /** The server's root directory as its users see it (`/workspace` in the sandbox). */
  serverRoot: string;
  /** Where the server keeps the users' lab settings and workspaces (shown in the Settings Editor). */
  stateDir: string;
  /** The lab's origin of its own (LAB_ORIGIN, decision 0263): there, and only there, its outputs' scripts run. */
  ownOrigin?: string | undefined;
}

/** The prebuilt extensions JupyterLab loads (jupyterlab_server's `federated_extensions`), from their installed package.json. */
function federatedExtensions(dir: string | undefined): Array<Record<string, string>> {
  if (dir === undefined) return [];
  const packages: string[] = [];
  try {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      if (!entry.isDirectory()) continue;
      if (!entry.name.startsWith('@')) packages.push(join(dir, entry.name, 'package.json'));
      else for (const inner of readdirSync(join(dir, entry.name))) packages.push(join(dir, entry.name, inner, 'package.json'));
    }
  } catch {
    return [];
  }
  const out: Array<Record<string, string>> = [];
  for (const file of packages.sort()) {
    try {
      const pkg = JSON.parse(readFileSync(file, 'utf8')) as { name?: unknown; jupyterlab?: { _build?: Record<string, unknown> } };
      const build = pkg.jupyterlab?._build;
      if (typeof pkg.name !== 'string' || typeof build?.load !== 'string') continue;
      const ext: Record<string, string> = { name: pkg.name, load: build.load };
      for (const key of ['extension', 'mimeExtension', 'style'] as const) if (typeof build[key] === 'string') ext[key] = build[key];
      out.push(ext);
    } catch {
      /* not an extension */
    }
  }
  return out;
}

/** The script tag of the built host's page (extensions/lab-host/build/static/index.html). */
function mainScript(hostDir: string): string | undefined {
  try {
    const html = readFileSync(join(hostDir, 'build', 'static', 'index.html'), 'utf8');
    return /\/(main\.[0-9a-f]+\.js)"/.exec(html)?.[1];
  } catch {
    return undefined;
  }
}

/** JSON inside a `<script>` element: nothing in it can end the element. */
const scriptJson = (value: unknown) => JSON.stringify(value).replace(/[<>&\u2028\u2029]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);

let storeId = 0;

/** The host's main script and the prebuilt extensions, read again after a few seconds (a rebuild is served without a restart). */
let host: { key: string; at: number; main: string | undefined; federated: Array<Record<string, string>> } | undefined;
function installedHost(files: LabFiles): { main: string | undefined; federated: Array<Record<string, string>> } {
  const key = `${files.hostDir}\0${files.extensionsDir ?? ''}`;
  if (host === undefined || host.key !== key || Date.now() - host.at > 5000)
    host = { key, at: Date.now(), main: mainScript(files.hostDir), federated: federatedExtensions(files.extensionsDir) };
  return host;
}

/**
 * JupyterLab's page for `path` (one of `LAB_PAGE`), made here with its page config: the URLs
 * JupyterLab loads its code, settings and translations from are the trusted side's, whatever the
 * server says (jupyterlab_server's `LabHandler`, whose config this repeats).
 */
export function labPage(path: string, files: LabFiles, ctx: LabPageContext, notFound = false): string | undefined {
  const m = notFound ? null : LAB_PAGE.exec(path);
  const { main, federated } = installedHost(files);
  if ((!notFound && !m) || main === undefined) return undefined;
  const b = ctx.base;
  const urls = {
    appUrl: '/lab',
    labextensionsUrl: '/lab/extensions',
    licensesUrl: '/lab/api/licenses',
    listingsUrl: '/lab/api/listings',
    settingsUrl: '/lab/api/settings',
    themesUrl: '/lab/api/themes',
    translationsApiUrl: '/lab/api/translations',
    treeUrl: '/lab/tree',
    workspacesApiUrl: '/lab/api/workspaces',
  };
  const config: Record<string, unknown> = {
    appName: 'JupyterLab',
    appNamespace: 'codeagent_lab',
    appSettingsDir: `${SANDBOX_LAB_DIR}/build/application_settings`,
    appVersion: '4.5.10',
    baseUrl: b,
    cacheFiles: true,
    disabledExtensions: [],
    extraLabextensionsPath: [SANDBOX_EXTENSIONS_DIR],
    federated_extensions: federated,
    fullStaticUrl: `${b}static/codeagent_lab`,
    ignorePlugins: [],
    labextensionsPath: [],
    mathjaxConfig: 'TeX-AMS_HTML-full,Safe',
    mode: m?.[1] === 'doc' ? 'single-document' : 'multiple-document',
    notebookStartsKernel: true,
    preferredPath: '/',
    schemasDir: `${SANDBOX_LAB_DIR}/build/schemas`,
    serverRoot: ctx.serverRoot,
    staticDir: `${SANDBOX_LAB_DIR}/build/static`,
    store_id: storeId++,
    templatesDir: `${SANDBOX_LAB_DIR}/build/static`,
    terminalsAvailable: true,
    themesDir: `${SANDBOX_LAB_DIR}/build/themes`,
    treePath: m?.[3] === undefined ? '' : decodeSafely(m[3].slice('/tree/'.length)),
    userSettingsDir: `${ctx.stateDir}/user_settings`,
    workspace: m?.[2] === undefined ? 'default' : m[2].slice('/workspaces/'.length),
    workspacesDir: `${ctx.stateDir}/workspaces`,
    wsUrl: '',
    ...urls,
    // jupyterlab_server's NotFoundHandler: the app opens and says this path is not one of its own.
    ...(notFound ? { notFoundUrl: `${b}${path.slice(1)}` } : {}),
  };
  for (const [name, url] of Object.entries(urls)) config[`full${name[0]!.toUpperCase()}${name.slice(1)}`] = `${b}${url.slice(1)}`;
  return `<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <title>JupyterLab</title>
  <meta name="viewport" content="width=device-width, initial-scale=1">
  <script id="jupyter-config-data" type="application/json">${scriptJson(config)}</script>
  <script defer src="${b}static/codeagent_lab/${main}"></script>
</head>
<body class="jp-ThemedContainer"></body>
</html>
`;
}

const splitQuery = (rest: string): [string, string | undefined] => {
  const at = rest.indexOf('?');
  return at === -1 ? [rest, undefined] : [rest.slice(0, at), rest.slice(at + 1)];
};

const decodeSafely = (s: string) => {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
};

/** Media types a browser runs as a script (the WHATWG MIME Sniffing standard's JavaScript MIME types). */
const SCRIPT_TYPES = new Set([
  'application/ecmascript',
  'application/javascript',
  'application/x-ecmascript',
  'application/x-javascript',
  'text/ecmascript',
  'text/javascript',
  'text/javascript1.0',
  'text/javascript1.1',
  'text/javascript1.2',
  'text/javascript1.3',
  'text/javascript1.4',
  'text/javascript1.5',
  'text/jscript',
  'text/livescript',
  'text/x-ecmascript',
  'text/x-javascript',
]);

/**
 * The origin the browser sees, from what the gateway (or the nginx ingress) vouches for, or
 * undefined when it is not a plain scheme and host (then the lab's page allows no script at all).
 */
export function browserOrigin(headers: IncomingHttpHeaders): string | undefined {
  const first = (v: string | string[] | undefined) => (Array.isArray(v) ? v[0] : v)?.split(',')[0]?.trim();
  const proto = first(headers['x-forwarded-proto']) ?? 'http';
  const host = first(headers['x-forwarded-host']) ?? first(headers.host);
  if (proto !== 'http' && proto !== 'https') return undefined;
  if (host === undefined || !/^(?:[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?$/.test(host)) return undefined;
  return `${proto}://${host.toLowerCase()}`;
}

/**
 * The CSP of JupyterLab's pages at `base` (`/jupyter/<workspace>/` or `/jupyter/`) for a browser at
 * `origin`: scripts from the installed files' paths only. At the lab's origin of its own
 * (`ownOrigin`, decision 0263), where nothing of the platform is, also its outputs' scripts
 * (inline, and from the web: Plotly, Bokeh and the like load theirs from a CDN) and frames.
 */
export function labPageCsp(origin: string | undefined, base: string, ownOrigin?: string): string {
  if (origin !== undefined && origin === ownOrigin) {
    return [
      "script-src 'self' 'unsafe-inline' 'unsafe-eval' blob: data: https:",
      "frame-src 'self' blob: data: https:",
      "object-src 'none'",
      "base-uri 'none'",
      "form-action 'self'",
      "frame-ancestors 'self'",
    ].join('; ');
  }
  const at = (path: string) => `${origin}${base}${path.slice(1)}`;
  const scripts = origin === undefined ? "'none'" : `'unsafe-eval' ${at(LAB_STATIC)} ${at(LAB_EXTENSIONS)}`;
  // Frames: the workspace's files (sandboxed by the runtime), never the platform's own pages,
  // which an output could lay invisibly over a button of its own.
  const frames = origin === undefined ? "'none'" : at('/files/');
  return [`script-src ${scripts}`, `frame-src ${frames}`, "object-src 'none'", "base-uri 'none'", "form-action 'none'", "frame-ancestors 'self'"].join('; ');
}

/**
 * The headers of a server's answer a browser gets: what describes the content and its caching,
 * nothing that acts on the origin (a cookie of the server's would be the platform's, its path can
 * be `/`; `Clear-Site-Data` would log the member out; `Refresh`, `Link`, CORS, HSTS, `Alt-Svc`,
 * reporting endpoints, …). Node writes the connection's own.
 */
const ANSWER_HEADERS = new Set([
  'accept-ranges',
  'allow',
  'cache-control',
  'content-disposition',
  'content-encoding',
  'content-language',
  'content-length',
  'content-range',
  'content-security-policy',
  'content-type',
  'date',
  'etag',
  'expires',
  'last-modified',
  'location',
  'pragma',
  'retry-after',
  'vary',
]);

/** The policy of every answer below `/files/` (decision 0249). */
export const FILES_POLICY = "sandbox allow-scripts; connect-src 'none'; form-action 'none'";

/**
 * The head of a server's answer as the browser gets it (see the module's comment): the headers
 * of `ANSWER_HEADERS` only; `sandbox` as a policy of its own (`sandbox allow-scripts` on
 * `/files/`, Jupyter's own choice there: scripts of a unique origin, that connect and post nowhere), whatever policy the server
 * sent beside it; never a script's type; a redirect only to a path of this lab (`base`).
 */
export function labAnswerHeaders(rest: string, headers: IncomingHttpHeaders, base: string): IncomingHttpHeaders {
  const path = splitQuery(rest)[0];
  const out: IncomingHttpHeaders = {};
  for (const name in headers) if (ANSWER_HEADERS.has(name)) out[name] = headers[name];
  out['x-content-type-options'] = 'nosniff';
  // A browser reads a list of types and keeps the last it understands (Fetch's MIME type
  // extraction): a list, or any script type in it, is answered as text.
  const types = String(headers['content-type'] ?? '').split(',');
  if (types.length > 1 || types.some((t) => SCRIPT_TYPES.has(t.split(';')[0]!.trim().toLowerCase()))) out['content-type'] = 'text/plain; charset=utf-8';
  const location = out.location;
  if (location !== undefined && (typeof location !== 'string' || !location.startsWith(base) || /[\\\s]/.test(location))) delete out.location;
  const csp = headers['content-security-policy'];
  const theirs = (Array.isArray(csp) ? csp : csp === undefined ? [] : [csp]).filter((v) => v.trim() !== '');
  // (A page of the workspace's files runs its scripts in an origin of its own, and sends nothing
  // anywhere by script or form: at a platform address, it would be a login page's perfect copy.)
  out['content-security-policy'] = [...theirs, path.startsWith('/files/') ? FILES_POLICY : 'sandbox'].join(', ');
  return out;
}

/** The installed settings plugins: their ids, JSON schemas and package versions. */
export interface PluginSchemas {
  /** Every installed plugin id (`<package>:<plugin>`), sorted. */
  ids: () => string[];
  /** The installed schema of a plugin, or undefined when it is not installed. */
  schemaOf: (id: string) => unknown;
  /** Its package's version, as jupyterlab_server gives it (`N/A` when unknown). */
  versionOf: (id: string) => string;
}

/**
 * The installed JSON schemas of the settings plugins, by plugin id (`<package>:<plugin>`): the
 * host's `build/schemas/<package>/<plugin>.json` and each prebuilt extension's own, listed once,
 * so that ids a server makes up cost a map lookup.
 */
export function pluginSchemas(files: LabFiles): PluginSchemas {
  let index: Map<string, string> | undefined;
  const cache = new Map<string, unknown>();
  const versions = new Map<string, string>();
  const list = (dir: string, into: Map<string, string>) => {
    const packages: string[] = [];
    for (const entry of safeReaddir(dir)) {
      if (!entry.startsWith('@')) packages.push(entry);
      else for (const inner of safeReaddir(join(dir, entry))) packages.push(`${entry}/${inner}`);
    }
    for (const pkg of packages)
      for (const file of safeReaddir(join(dir, pkg)))
        if (file.endsWith('.json') && !into.has(`${pkg}:${file.slice(0, -5)}`)) into.set(`${pkg}:${file.slice(0, -5)}`, join(dir, pkg, file));
  };
  const indexed = (): Map<string, string> => {
    if (index === undefined) {
      index = new Map();
      list(join(files.hostDir, 'build', 'schemas'), index);
      if (files.extensionsDir !== undefined)
        for (const entry of safeReaddir(files.extensionsDir)) {
          const names = entry.startsWith('@') ? safeReaddir(join(files.extensionsDir, entry)).map((inner) => `${entry}/${inner}`) : [entry];
          for (const name of names) list(join(files.extensionsDir, name, 'schemas'), index);
        }
    }
    return index;
  };
  return {
    ids: () => [...indexed().keys()].sort(),
    schemaOf: (id) => {
      const file = indexed().get(id);
      if (file === undefined) return undefined;
      if (!cache.has(id)) {
        try {
          cache.set(id, JSON.parse(readFileSync(file, 'utf8')));
        } catch {
          cache.set(id, undefined);
        }
      }
      return cache.get(id);
    },
    versionOf: (id) => {
      const file = indexed().get(id);
      if (file === undefined) return 'N/A';
      let version = versions.get(id);
      if (version === undefined) {
        try {
          const pkg = JSON.parse(readFileSync(join(dirname(file), 'package.json.orig'), 'utf8')) as { version?: unknown };
          version = typeof pkg.version === 'string' ? pkg.version : 'N/A';
        } catch {
          version = 'N/A';
        }
        versions.set(id, version);
      }
      return version;
    },
  };
}

const safeReaddir = (dir: string): string[] => {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
};

/**
 * The settings of a plugin (top-level keys of its schema) whose values bind commands with their
 * arguments: a value the schema describes as objects with a `command` property (the main menu's
 * `menus`, the context menu, every `toolbar`, the keyboard `shortcuts`).
 */
export function commandKeys(schema: unknown): string[] {
  if (typeof schema !== 'object' || schema === null) return [];
  const { properties, definitions } = schema as { properties?: unknown; definitions?: unknown };
  if (typeof properties !== 'object' || properties === null) return [];
  const defs = typeof definitions === 'object' && definitions !== null ? (definitions as Record<string, unknown>) : {};
  const binds = (node: unknown, seen: Set<unknown>): boolean => {
    if (typeof node !== 'object' || node === null || seen.has(node)) return false;
    seen.add(node);
    const n = node as Record<string, unknown>;
    if (typeof n.properties === 'object' && n.properties !== null && 'command' in n.properties) return true;
    if (typeof n.$ref === 'string' && n.$ref.startsWith('#/definitions/') && binds(defs[n.$ref.slice('#/definitions/'.length)], seen)) return true;
    return Object.values(n).some((v) => binds(v, seen));
  };
  return Object.entries(properties).flatMap(([key, value]) => (binds(value, new Set()) ? [key] : []));
}

/** A plugin's user settings as JupyterLab reads them (JSON5 text), or none when they are not an object. */
function userSettings(raw: unknown): Record<string, unknown> {
  try {
    const parsed = typeof raw === 'string' ? JSON5.parse<unknown>(raw) : undefined;
    return typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed) ? (parsed as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}

/**
 * The settings answers (`GET /lab/api/settings`, `…/settings/<id>`) with each plugin's schema
 * replaced by the installed one (a plugin without one is left out, or 404): JupyterLab compiles
 * the schemas into code. The users' settings are data and pass, except those that bind commands
 * (commandKeys): the settings are one store per workspace server, written by every member and
 * by the kernel's own code, and a shortcut, menu or toolbar item runs its command with its
 * arguments in the session of whoever uses it ("open this URL" fetched the platform's API with an
 * administrator's session into the workspace; decision 0249). The menus, shortcuts and toolbars
 * are the installed defaults.
 */
export function settingsCheck(plugins: PluginSchemas): (method: string | undefined, rest: string) => AnswerCheck | undefined {
  const { schemaOf } = plugins;
  const bindings = new Map<string, string[]>();
  const bindingKeys = (id: string, schema: unknown): string[] => {
    let keys = bindings.get(id);
    if (keys === undefined) bindings.set(id, (keys = commandKeys(schema)));
    return keys;
  };
  return (method, rest) => {
    const m = method === 'GET' ? LAB_SETTINGS.exec(splitQuery(rest)[0]) : null;
    if (!m) return undefined;
    const single = m[1] !== undefined && m[1] !== '';
    const refused = { status: 502, body: { message: "the workspace's Jupyter server answered settings that are not JupyterLab's" } };
    const rewrite = (body: Buffer): { status: number; body: Record<string, unknown> } => {
      const answer = JSON.parse(body.toString('utf8')) as unknown;
      if (typeof answer !== 'object' || answer === null || Array.isArray(answer)) return refused;
      // Each installed plugin once: a list that names one plugin many times would multiply its schema.
      const seen = new Set<string>();
      const trusted = (entry: unknown): Record<string, unknown> | undefined => {
        if (typeof entry !== 'object' || entry === null) return undefined;
        const e = entry as Record<string, unknown>;
        if (typeof e.id !== 'string' || seen.has(e.id)) return undefined;
        const schema = schemaOf(e.id);
        if (schema === undefined) return undefined;
        seen.add(e.id);
        // The locale becomes a URL JupyterLab fetches a plural rule from and compiles (a locale
        // of `%2e%2e/x` leaves the translations API after the check): no language pack is
        // installed, so the translation settings are the defaults, whatever the server says.
        if (e.id === TRANSLATION_PLUGIN) return { ...e, schema, raw: '{}', settings: {} };
        const keys = bindingKeys(e.id, schema);
        if (keys.length === 0) return { ...e, schema };
        // Read from `raw`, as JupyterLab does (the server's `settings` beside it may say otherwise), and written back as JSON.
        const user = userSettings(e.raw);
        for (const key of keys) delete user[key];
        return { ...e, schema, raw: JSON.stringify(user, null, 2), settings: user };
      };
      if (single) {
        const entry = trusted(answer);
        return entry ? { status: 200, body: entry } : { status: 404, body: { message: 'no such settings plugin is installed' } };
      }
      const list = (answer as { settings?: unknown }).settings;
      return { status: 200, body: { ...answer, settings: (Array.isArray(list) ? list : []).map(trusted).filter((e) => e !== undefined) } };
    };
    // Never the server's own answer: a check that fails answers 502 (relayRequest would keep the original).
    return (_status, body) => {
      try {
        return Promise.resolve(rewrite(body));
      } catch {
        return Promise.resolve(refused);
      }
    };
  };
}

/** The largest settings text of one plugin a user may store (JupyterLab's are a few KiB). */
export const USER_SETTINGS_MAX_BYTES = 256 * 1024;

/**
 * JupyterLab's settings API (`GET /lab/api/settings`, `GET` and `PUT …/settings/<plugin id>`)
 * answered by the runtime from a store of each platform user's own (decisions 0251, 0252), never
 * by the workspace's server: what one member sets (a theme, a shortcut, the code agent's password
 * in the bridge extension's settings) is theirs alone, in every workspace, and neither another
 * member nor a kernel can write it. The answers have jupyterlab_server's shape, with the installed
 * schemas. Says false for a path it does not answer.
 */
export function userSettingsAnswers(
  plugins: PluginSchemas,
  store: LabStateStore,
): (req: IncomingMessage, res: ServerResponse, userId: string, rest: string) => boolean {
  const entry = (id: string, stored: StoredLabText | undefined) => {
    // No language pack is installed: the translation settings are the defaults (decision 0245).
    const own = id === TRANSLATION_PLUGIN ? undefined : stored;
    const raw = own?.text ?? '{}';
    return {
      id,
      schema: plugins.schemaOf(id),
      version: plugins.versionOf(id),
      raw,
      settings: userSettings(raw),
      last_modified: own?.updated.toISOString() ?? null,
      created: own?.created.toISOString() ?? null,
    };
  };
  return (req, res, userId, rest) => {
    const m = LAB_SETTINGS.exec(splitQuery(rest)[0]);
    if (!m) return false;
    const id = m[1] === undefined || m[1] === '' ? undefined : decodeSafely(m[1]);
    const user = userId.toLowerCase();
    if (id !== undefined && plugins.schemaOf(id) === undefined) {
      refuse(req, res, 404, `no settings plugin ${id} is installed`);
      return true;
    }
    if (req.method === 'GET' || req.method === 'HEAD') {
      req.resume();
      const answer =
        id === undefined
          ? store.settings(user).then((own) => ({ settings: plugins.ids().map((p) => entry(p, own.get(p))) }))
          : store.setting(user, id).then((own) => entry(id, own));
      answer.then(
        (body) => jsonAnswer(res, 200, body),
        () => jsonAnswer(res, 500, { message: 'the settings could not be read' }),
      );
      return true;
    }
    if (req.method !== 'PUT' || id === undefined) {
      refuse(req, res, 405, 'settings are read with GET and saved with PUT of one plugin');
      return true;
    }
    bodyOf(req, USER_SETTINGS_MAX_BYTES + 1024, (body) => {
      if (body === undefined) return jsonAnswer(res, 413, { message: `the settings are larger than ${USER_SETTINGS_MAX_BYTES} bytes` });
      let raw: unknown;
      try {
        raw = (JSON.parse(body.toString('utf8')) as { raw?: unknown }).raw;
      } catch {
        return jsonAnswer(res, 400, { message: "send JSON of the form {'raw': '<the settings as JSON5>'}" });
      }
      if (typeof raw !== 'string') return jsonAnswer(res, 400, { message: "send JSON of the form {'raw': '<the settings as JSON5>'}" });
      if (Buffer.byteLength(raw) > USER_SETTINGS_MAX_BYTES)
        return jsonAnswer(res, 413, { message: `the settings are larger than ${USER_SETTINGS_MAX_BYTES} bytes` });
      let parsed: unknown;
      try {
        parsed = JSON5.parse<unknown>(raw);
      } catch (err) {
        return jsonAnswer(res, 400, { message: `the settings are not JSON5: ${(err as Error).message}` });
      }
      if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return jsonAnswer(res, 400, { message: 'the settings are not an object' });
      saved(res, store.saveSetting(user, id, raw), 'the settings could not be saved');
    });
    return true;
  };
}

/** The request's body, or undefined (the rest unread) when it is longer than `max` bytes. */
function bodyOf(req: IncomingMessage, max: number, done: (body: Buffer | undefined) => void): void {
  const chunks: Buffer[] = [];
  let size = 0;
  req.on('data', (chunk: Buffer) => {
    size += chunk.length;
    if (size <= max) chunks.push(chunk);
  });
  req.on('end', () => done(size > max ? undefined : Buffer.concat(chunks)));
}

/** 204 once `write` is done, or 500 naming what could not be saved. */
function saved(res: ServerResponse, write: Promise<void>, failure: string): void {
  write.then(
    () => res.writeHead(204, { 'cache-control': 'no-store' }).end(),
    () => jsonAnswer(res, 500, { message: failure }),
  );
}

const LAB_WORKSPACES = /^\/lab\/api\/workspaces(?:\/(.*))?$/;
/** The names JupyterLab's page routes accept for a layout (`/lab/workspaces/<name>`). */
const WORKSPACE_NAME = /^[A-Za-z0-9_-]{1,100}$/;
/** The largest layout a user may store, and how many. */
export const USER_WORKSPACE_MAX_BYTES = 1024 * 1024;
export const USER_WORKSPACES_MAX = 50;

/**
 * JupyterLab's layouts (`/lab/api/workspaces`: list, `GET`, `PUT`, `DELETE` of one), answered
 * like the settings (userSettingsAnswers, decisions 0251, 0252) from the user's own store, in
 * jupyterlab_server's shape: what one member has open is not another's. Says false for a path it
 * does not answer.
 */
export function userWorkspacesAnswers(store: LabStateStore): (req: IncomingMessage, res: ServerResponse, userId: string, rest: string) => boolean {
  // The stored text with the times jupyterlab_server adds to its metadata.
  const shown = (stored: StoredLabText): Record<string, unknown> => {
    const workspace = JSON.parse(stored.text) as { metadata?: Record<string, unknown> };
    return { ...workspace, metadata: { ...workspace.metadata, last_modified: stored.updated.toISOString(), created: stored.created.toISOString() } };
  };
  return (req, res, userId, rest) => {
    const m = LAB_WORKSPACES.exec(splitQuery(rest)[0]);
    if (!m) return false;
    const user = userId.toLowerCase();
    const name = m[1] === undefined || m[1] === '' ? undefined : decodeSafely(m[1]);
    if (name !== undefined && !WORKSPACE_NAME.test(name)) {
      refuse(req, res, 404, 'a layout name is 1 to 100 letters, digits, - or _');
      return true;
    }
    if (req.method === 'GET' || req.method === 'HEAD') {
      req.resume();
      const answer =
        name === undefined
          ? store.layouts(user).then((all) => {
              const values = all.map(shown);
              return { workspaces: { ids: values.map((v) => (v.metadata as { id?: unknown }).id), values } };
            })
          : store.layout(user, name).then((stored) => (stored === undefined ? { data: {}, metadata: { id: `/${name}` } } : shown(stored)));
      answer.then(
        (body) => jsonAnswer(res, 200, body),
        () => jsonAnswer(res, 500, { message: 'the layouts could not be read' }),
      );
      return true;
    }
    if (name === undefined) {
      refuse(req, res, 400, 'name the layout: /lab/api/workspaces/<name>');
      return true;
    }
    if (req.method === 'DELETE') {
      req.resume();
      store.deleteLayout(user, name).then(
        (deleted) => (deleted ? res.writeHead(204, { 'cache-control': 'no-store' }).end() : jsonAnswer(res, 404, { message: `no layout ${name}` })),
        () => jsonAnswer(res, 500, { message: 'the layout could not be removed' }),
      );
      return true;
    }
    if (req.method !== 'PUT') {
      refuse(req, res, 405, 'layouts are read with GET, saved with PUT and removed with DELETE');
      return true;
    }
    bodyOf(req, USER_WORKSPACE_MAX_BYTES, (body) => {
      if (body === undefined) return jsonAnswer(res, 413, { message: `the layout is larger than ${USER_WORKSPACE_MAX_BYTES} bytes` });
      let workspace: { metadata?: { id?: unknown } } | undefined;
      const text = body.toString('utf8');
      try {
        workspace = JSON.parse(text) as { metadata?: { id?: unknown } };
      } catch (err) {
        return jsonAnswer(res, 400, { message: `the layout is not JSON: ${(err as Error).message}` });
      }
      const id = typeof workspace?.metadata?.id === 'string' ? decodeSafely(workspace.metadata.id.replace(/^(?!\/)/, '/')) : undefined;
      if (id !== `/${name}`) return jsonAnswer(res, 400, { message: `the layout's metadata.id must be /${name}` });
      store.saveLayout(user, name, text, USER_WORKSPACES_MAX).then(
        (outcome) =>
          outcome === 'saved'
            ? res.writeHead(204, { 'cache-control': 'no-store' }).end()
            : jsonAnswer(res, 409, { message: `at most ${USER_WORKSPACES_MAX} layouts are kept: delete one first` }),
        () => jsonAnswer(res, 500, { message: 'the layout could not be saved' }),
      );
    });
    return true;
  };
}

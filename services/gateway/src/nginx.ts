import { FORM_OVERHEAD_BYTES } from './app.js';
import { PAGES } from './landing.js';
import { MESSAGES, REFUSAL_HEADER, REQUIRE_HEADER, ROUTES, UPSTREAMS, USER_ID_HEADER, type ProxyRoute, type Route, type UpstreamName } from './routes.js';
import { DATA_CSP, REFERRER_POLICY } from './security-headers.js';
import { ACCESS_HEADER, SESSION_CHECK_PATH, SESSION_COOKIE, WORKSPACE_HEADER } from './jupyter-auth.js';
import { webAppLocations } from './web-app-nginx.js';

export interface NginxOptions {
  /** Where nginx listens (HOST, PORT). */
  listen: { host: string; port: number };
  /** Addresses of each component's instances (BACKEND_URL, CLUSTER_ADMIN_URL, BRIDGE_URL, JUPYTERLAB_URL). */
  upstreams: Partial<Record<UpstreamName, readonly string[]>> & Record<'backend' | 'clusterAdmin' | 'bridge', readonly string[]>;
  /** The Jupyter server's token (JUPYTERLAB_TOKEN): nginx injects it, so the file is a secret. */
  jupyterToken: string;
  /**
   * `/jupyter/<workspace id>/` goes to the runtime's per-workspace JupyterLab (JUPYTERLAB_URL
   * unset): members only, viewers read only, pages without a session sent to `/login?next=`.
   */
  jupyterPerWorkspace?: boolean;
  /** TRUSTED_PROXIES. */
  trustedProxies?: readonly string[];
  /** MAX_UPLOAD_BYTES: a larger declared body gets 413 (plus the multipart framing, as in the gateway). */
  maxUploadBytes?: number;
  /** Upstream time limit in ms (default 300 s, as the gateway's). */
  timeoutMs?: number;
  /** Directory for the pid file and nginx's temporary files (writable by the user running nginx). */
  runDir: string;
  /** Access log: a path (`/dev/stdout` in a container), or false for none (default: `runDir`/access.log). */
  accessLog?: string | false;
  /** Error log: a path or `stderr` (default). */
  errorLog?: string;
  workerProcesses?: number | 'auto';
  workerConnections?: number;
  /** Only the `http` block's content, for an `include` inside an existing nginx.conf. */
  httpOnly?: boolean;
  routes?: readonly Route[];
  /** The built web app (`web/dist/app`), served as the gateway serves it (web-app.ts); without it `/` is the start page. */
  webRoot?: string;
}

/** A string in single quotes for nginx. `$` starts a variable there and cannot be escaped: refused unless meant. */
function q(text: string, variables = false): string {
  if (!variables && text.includes('$')) throw new Error(`nginx string would interpolate a variable: ${text.slice(0, 60)}`);
  return `'${text.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;
}

const json = (body: Record<string, unknown>) => q(JSON.stringify(body));

function upstreamBlockName(name: UpstreamName): string {
  return `codeagent_${name.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`)}`;
}

function hostPort(url: string): { scheme: string; server: string } {
  const u = new URL(url);
  return { scheme: u.protocol.replace(':', ''), server: `${u.hostname}:${u.port || (u.protocol === 'https:' ? '443' : '80')}` };
}

function listenAddress(host: string, port: number): string {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}

/** nginx time from milliseconds. */
const ms = (value: number) => (value % 1000 === 0 ? `${value / 1000}s` : `${value}ms`);

const indent = (lines: string[], by = '  ') => lines.map((l) => (l === '' ? l : by + l));

/**
 * Renders the gateway's route table (`routes.ts`) as an nginx configuration with the same
 * behaviour (`codeagent nginx-config`, decision 0060): upstream pools with every instance
 * (passive health checks: an instance that fails is skipped for a while, an idempotent request
 * is retried on the next one), request bodies streamed (`proxy_request_buffering off`) and
 * responses too, websockets, `/internal` answered 404, `x-request-id` kept or made (a UUID) and
 * passed on and logged, `x-forwarded-*` from TRUSTED_PROXIES only, the security headers, and
 * `/jupyter` behind `auth_request` to `GET /api/v1/auth/session` (system administrators only,
 * one user on one Jupyter instance, the Jupyter token injected). Error answers are the gateway's
 * JSON. The routing tests run through nginx with this file (`ingress-testing.ts`).
 */
export function renderNginxConfig(opts: NginxOptions): string {
  const routes = opts.routes ?? ROUTES;
  const timeoutMs = opts.timeoutMs ?? 300_000;
  const trusted = opts.trustedProxies ?? [];
  const limit = opts.maxUploadBytes === undefined ? 0 : opts.maxUploadBytes + FORM_OVERHEAD_BYTES;
  const runDir = opts.runDir.replace(/\/+$/, '');
  const accessLog = opts.accessLog === false ? 'off' : `${opts.accessLog ?? `${runDir}/access.log`} codeagent`;
  const errorLog = !opts.errorLog || opts.errorLog === 'stderr' ? 'stderr' : opts.errorLog;
  const upstreamNames = (Object.keys(UPSTREAMS) as UpstreamName[]).filter((n) => (opts.upstreams[n]?.length ?? 0) > 0);
  const schemeOf = (name: UpstreamName) => hostPort(opts.upstreams[name]![0]!).scheme;

  const http: string[] = [];
  const add = (...lines: string[]) => http.push(...lines);

  add(
    '# Logs: one JSON line per request, with the request id the components log too.',
    `log_format codeagent escape=json '{"time":"$time_iso8601","request_id":"$codeagent_request_id","method":"$request_method","uri":"$request_uri",' '"status":$status,"bytes":$body_bytes_sent,"duration_s":$request_time,"upstream":"$upstream_addr","upstream_status":"$upstream_status"}';`,
    `access_log ${accessLog};`,
    `client_body_temp_path ${runDir}/client_body;`,
    `proxy_temp_path ${runDir}/proxy;`,
    `fastcgi_temp_path ${runDir}/fastcgi;`,
    `uwsgi_temp_path ${runDir}/uwsgi;`,
    `scgi_temp_path ${runDir}/scgi;`,
    'server_tokens off;',
    'default_type application/json;',
    'keepalive_timeout 72s;',
    '',
    '# Bodies stream both ways (uploads of any size, server-sent events of /mcp), as in the gateway.',
    `client_max_body_size ${limit};`,
    'proxy_request_buffering off;',
    'proxy_buffering off;',
    'proxy_http_version 1.1;',
    'proxy_connect_timeout 5s;',
    `proxy_send_timeout ${ms(timeoutMs)};`,
    `proxy_read_timeout ${ms(timeoutMs)};`,
    '# An instance that fails is skipped; a request is retried on the next instance only when nginx',
    '# may (nothing was sent yet, or an idempotent method), once.',
    'proxy_next_upstream error;',
    'proxy_next_upstream_tries 2;',
    '# Set by the ingress itself, never passed on from a component.',
    'proxy_hide_header X-Content-Type-Options;',
    'proxy_hide_header X-Request-Id;',
    '',
    "# x-request-id: the caller's when well-formed, else a new UUID.",
    'map $request_id $codeagent_new_request_id {',
    '  "~^(?<a>.{8})(?<b>.{4})(?<c>.{4})(?<d>.{4})(?<e>.{12})$" "$a-$b-$c-$d-$e";',
    '}',
    'map $http_x_request_id $codeagent_request_id {',
    '  "~^[A-Za-z0-9._:-]{1,128}$" $http_x_request_id;',
    '  default $codeagent_new_request_id;',
    '}',
    '# A dot segment in any spelling, or a backslash (ambiguousPathReason, which every component',
    '# applies): nginx would resolve it and route the request elsewhere than the path the client',
    '# wrote, which a browser compares with a CSP (decision 0245). Refused with 400, as the gateway does.',
    'map $request_uri $codeagent_ambiguous_path {',
    '  "~^[^?]*\\x5c" 1;',
    '  "~*^[^?]*(?:/|%2f|%5c)(?:\\.|%2e){1,2}(?:/|%2f|%5c|\\?|$)" 1;',
    '  default 0;',
    '}',
    'map $http_upgrade $codeagent_connection {',
    '  "" "";',
    '  default upgrade;',
    '}',
    '',
    '# TRUSTED_PROXIES: only their X-Forwarded-For/-Proto/-Host are believed (decision 0032).',
  );
  if (trusted.length > 0) {
    add(...trusted.map((t) => `set_real_ip_from ${t};`), 'real_ip_header X-Forwarded-For;', 'real_ip_recursive on;');
  }
  add(
    'geo $realip_remote_addr $codeagent_trusted_peer {',
    '  default 0;',
    ...trusted.map((t) => `  ${t} 1;`),
    '}',
    'map "$codeagent_trusted_peer|$http_x_forwarded_proto" $codeagent_forwarded_proto {',
    '  "~*^1\\|(?:.*,)?\\s*https\\s*$" https;',
    '  "~*^1\\|(?:.*,)?\\s*http\\s*$" http;',
    '  default $scheme;',
    '}',
    'map "$codeagent_trusted_peer|$http_x_forwarded_host" $codeagent_forwarded_host {',
    '  "~^1\\|(?:.*,)?\\s*(?<h>[^,\\s]+)\\s*$" $h;',
    '  default $http_host;',
    '}',
    '',
    '# Security headers (decision 0031): nosniff always; a referrer policy and the data CSP unless the component sent its own.',
    'map $upstream_http_referrer_policy $codeagent_referrer_policy {',
    `  "" ${q(REFERRER_POLICY)};`,
    '  default "";',
    '}',
    'map $upstream_http_content_security_policy $codeagent_csp {',
    `  "" ${q(DATA_CSP)};`,
    '  default "";',
    '}',
    '',
    '# /jupyter: the platform session (Bearer, else the cookie), checked by the backend (decision 0033).',
    'map $http_authorization $codeagent_bearer {',
    '  "~^Bearer \\s*(?<t>.*?)\\s*$" $t;',
    '  default "";',
    '}',
    'map $codeagent_bearer $codeagent_session_token {',
    `  "" $cookie_${SESSION_COOKIE};`,
    '  default $codeagent_bearer;',
    '}',
    '# A cookie-only write or websocket must come from our own origin (Sec-Fetch-Site, else Origin = Host).',
    'map $request_method $codeagent_unsafe_method {',
    '  GET 0;',
    '  HEAD 0;',
    '  OPTIONS 0;',
    '  default 1;',
    '}',
    'map "$codeagent_unsafe_method|$http_upgrade" $codeagent_needs_origin {',
    '  "~^1\\|" 1;',
    '  "~*^0\\|websocket$" 1;',
    '  default 0;',
    '}',
    'map "$http_sec_fetch_site|$http_origin|$codeagent_forwarded_host" $codeagent_same_origin {',
    '  "~^(same-origin|none)\\|" 1;',
    '  "~^[^|]+\\|" 0;',
    '  "~*^\\|https?://([^/|]+)/?\\|\\1$" 1;',
    '  default 0;',
    '}',
    'map "$codeagent_bearer|$codeagent_needs_origin|$codeagent_same_origin" $codeagent_cross_site {',
    '  "~^\\|1\\|0$" 1;',
    '  default 0;',
    '}',
    "# Jupyter gets its own token instead of the user's credentials, and never the platform cookie.",
    'map $http_cookie $codeagent_cookie_without_session {',
    `  "~^(?<a>.*?)(?:^|;\\s*)${SESSION_COOKIE}=[^;]*(?<b>.*)$" "$a$b";`,
    '  default $http_cookie;',
    '}',
    'map $codeagent_cookie_without_session $codeagent_jupyter_cookie {',
    '  "~^;\\s*(?<rest>.*)$" $rest;',
    '  default $codeagent_cookie_without_session;',
    '}',
    "# A workspace's JupyterLab (/jupyter/<workspace id>/): the workspace, and whether the request writes.",
    'map $uri $codeagent_lab_workspace {',
    '  "~^/jupyter/(?<w>[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})(?:/|$)" $w;',
    '  default "";',
    '}',
    'map $codeagent_needs_origin $codeagent_lab_access {',
    '  1 write;',
    '  default read;',
    '}',
    '# A browser opening a page (GET, HTML accepted, no websocket): sent to the login page without a session.',
    'map "$request_method|$http_upgrade|$http_accept" $codeagent_page_request {',
    '  "~^GET\\|\\|.*text/html" 1;',
    '  default 0;',
    '}',
    '',
  );

  // Upstream pools: every instance; nginx skips one that fails (passive checks: open-source nginx has no active ones).
  for (const name of upstreamNames) {
    const servers = [...new Set(opts.upstreams[name]!.map((u) => hostPort(u).server))];
    add(
      `upstream ${upstreamBlockName(name)} {`,
      ...(name === 'jupyter'
        ? ['  # One user always reaches the same Jupyter server (its kernels live there), websockets included.', '  hash $codeagent_user consistent;']
        : []),
      ...servers.map((s) => `  server ${s} max_fails=1 fail_timeout=5s;`),
      `  keepalive ${name === 'jupyter' ? 16 : 64};`,
      '  keepalive_timeout 60s;',
      '}',
    );
  }
  add('');

  // Every location repeats what it needs: nginx inherits proxy_set_header, add_header and
  // error_page from outer levels only into locations that set none of their own.
  const errorPages = (extra: string[] = []) => [
    'error_page 413 = @codeagent_413;',
    'error_page 502 503 = @codeagent_502;',
    'error_page 504 = @codeagent_504;',
    ...extra,
  ];
  const securityHeaders = (csp: boolean) => [
    'add_header X-Request-Id $codeagent_request_id always;',
    'add_header X-Content-Type-Options nosniff always;',
    'add_header Referrer-Policy $codeagent_referrer_policy always;',
    ...(csp ? ['add_header Content-Security-Policy $codeagent_csp always;'] : []),
  ];
  const forwarded = [
    'proxy_set_header X-Request-Id $codeagent_request_id;',
    'proxy_set_header X-Forwarded-For $remote_addr;',
    'proxy_set_header X-Forwarded-Proto $codeagent_forwarded_proto;',
    'proxy_set_header X-Forwarded-Host $codeagent_forwarded_host;',
    '# Headers a client could use to pass itself off as someone else: only the ingress speaks for it.',
    'proxy_set_header Forwarded "";',
    'proxy_set_header X-Real-IP "";',
    'proxy_set_header X-Forwarded-Port "";',
    'proxy_set_header X-Forwarded-Prefix "";',
  ];
  const answer = (status: number, body: string, csp = true) => [...securityHeaders(csp), `return ${status} ${body};`];

  const perWorkspace = opts.jupyterPerWorkspace === true;
  const proxyLocation = (route: ProxyRoute): string[] => {
    const block = upstreamBlockName(route.upstream);
    const scheme = schemeOf(route.upstream);
    const body: string[] = [];
    if (route.sessionCheck) {
      body.push(
        ...errorPages([
          'error_page 401 = @codeagent_jupyter_401;',
          'error_page 403 = @codeagent_jupyter_403;',
          '# The session check itself failed (backend down): auth_request answers 500.',
          'error_page 500 = @codeagent_jupyter_unavailable;',
        ]),
        ...(perWorkspace ? ['if ($codeagent_lab_workspace = "") {', '  rewrite ^ /_codeagent/no-workspace last;', '}'] : []),
        'if ($codeagent_session_token = "") {',
        '  rewrite ^ /_codeagent/log-in last;',
        '}',
        'if ($codeagent_cross_site) {',
        '  rewrite ^ /_codeagent/cross-site last;',
        '}',
        'auth_request /_codeagent/session;',
        `auth_request_set $codeagent_user $upstream_http_${USER_ID_HEADER.replace(/-/g, '_')};`,
        ...(perWorkspace ? [`auth_request_set $codeagent_refusal $upstream_http_${REFUSAL_HEADER.replace(/-/g, '_')};`] : []),
        ...securityHeaders(!route.upstreamCsp),
        ...forwarded,
        `proxy_set_header Authorization ${q(`token ${opts.jupyterToken}`)};`,
        'proxy_set_header Cookie $codeagent_jupyter_cookie;',
        "# Who the checked user is, for what the runtime keeps per user (never the client's word).",
        `proxy_set_header ${USER_ID_HEADER} $codeagent_user;`,
        'proxy_set_header Origin "";',
        'proxy_set_header Referer "";',
        '# Jupyter listens on loopback and accepts only local host names.',
        'proxy_set_header Host localhost;',
      );
    } else {
      body.push(...errorPages(), ...securityHeaders(!route.upstreamCsp), ...forwarded);
    }
    if (route.websocket) {
      body.push('proxy_set_header Upgrade $http_upgrade;', 'proxy_set_header Connection $codeagent_connection;');
      // An open websocket is quiet between messages; keep it at least an hour.
      if (timeoutMs < 3_600_000) body.push('proxy_read_timeout 3600s;', 'proxy_send_timeout 3600s;');
    } else {
      body.push('proxy_set_header Connection "";');
    }
    const target = (suffix: string) => `${scheme}://${block}${route.rewritePrefix !== undefined ? route.rewritePrefix + suffix : ''}`;
    return [
      `location = ${route.prefix} {`,
      ...indent([...body, `proxy_pass ${target('')};`]),
      '}',
      `location ${route.prefix}/ {`,
      ...indent([...body, `proxy_pass ${target('/')};`]),
      '}',
    ];
  };

  const locations: string[] = [];
  const bridgeRoute = routes.find((r): r is ProxyRoute => r.kind === 'proxy' && r.prefix === '/jupyter/codeagent-bridge');
  if (bridgeRoute && opts.upstreams.bridge.length > 0) {
    // A workspace's JupyterLab reaches the bridge below its own base URL (the gateway's rewriteUrl).
    locations.push(
      'location ~ "^/jupyter/(?<codeagent_bridge_ws>[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})/codeagent-bridge(?<codeagent_bridge_rest>/.*)?$" {',
      ...indent(['rewrite ^ /jupyter/codeagent-bridge/workspaces/$codeagent_bridge_ws$codeagent_bridge_rest last;']),
      '}',
    );
  }
  const notFound = json({ error: 'not_found', message: 'no route here' });
  for (const route of routes) {
    if (route.kind === 'proxy') {
      if (!opts.upstreams[route.upstream]?.length) {
        // Only JupyterLab may be left out, as in the gateway.
        const body = json({
          error: 'not_found',
          message: 'no JupyterLab server is configured: set JUPYTERLAB_URL and start it (`codeagent jupyterlab`, see README)',
        });
        locations.push(`location = ${route.prefix} {`, ...indent(answer(404, body)), '}', `location ${route.prefix}/ {`, ...indent(answer(404, body)), '}');
      } else {
        locations.push(...proxyLocation(route));
      }
    } else if (route.kind === 'deny') {
      const deny = answer(404, json({ error: 'not_found' }));
      locations.push(`location = ${route.prefix} {`, ...indent(deny), '}', `location ${route.prefix}/ {`, ...indent(deny), '}');
    } else if (opts.webRoot !== undefined) {
      // The web app answers `/` and its own `/login` instead of the route table's pages: once.
      if (route.path === '/') locations.push(...webAppLocations(opts.webRoot, { securityHeaders, notFound: (body) => answer(404, json(body)), q, indent }));
    } else {
      const page = PAGES[route.page];
      locations.push(
        `location = ${route.path} {`,
        ...indent([
          'if ($request_method !~ ^(GET|HEAD)$) {',
          '  rewrite ^ /_codeagent/method-not-allowed last;',
          '}',
          `default_type ${q(page.contentType)};`,
          ...securityHeaders(false),
          `add_header Content-Security-Policy ${q(page.csp)} always;`,
          'add_header X-Frame-Options SAMEORIGIN always;',
          'add_header Cache-Control no-store always;',
          `return 200 ${q(page.body)};`,
        ]),
        '}',
      );
    }
  }

  const sessionCheck = routes.some((r) => r.kind === 'proxy' && r.sessionCheck && opts.upstreams[r.upstream]?.length);
  const internal: string[] = [
    '# Everything else: 404, as the gateway answers unknown routes.',
    'location / {',
    ...indent([...errorPages(), ...answer(404, notFound)]),
    '}',
    'location = /_codeagent/method-not-allowed {',
    ...indent(['internal;', 'add_header Allow "GET, HEAD" always;', ...answer(405, json({ error: 'method_not_allowed', message: 'use GET or HEAD' }))]),
    '}',
    'location @codeagent_413 {',
    ...indent(
      answer(413, q(JSON.stringify({ error: 'payload_too_large', message: MESSAGES.payloadTooLarge('$content_length', opts.maxUploadBytes ?? 0) }), true)),
    ),
    '}',
    'location @codeagent_502 {',
    ...indent(answer(502, json({ error: 'bad_gateway', message: MESSAGES.badGateway }))),
    '}',
    'location @codeagent_504 {',
    ...indent(answer(504, json({ error: 'gateway_timeout', message: MESSAGES.gatewayTimeout }))),
    '}',
  ];
  // A page request without a (valid) session goes to the login page and back (nginx cannot
  // percent-encode: `next` is the raw request URI, which the login page reads as one parameter
  // unless it holds `&`).
  const toLogin = perWorkspace
    ? ['if ($codeagent_page_request) {', '  add_header Cache-Control no-store always;', '  return 302 /login?next=$request_uri;', '}']
    : [];
  if (sessionCheck) {
    internal.push(
      '# The session check of /jupyter: the token as Bearer and nothing else of the client.',
      'location = /_codeagent/session {',
      ...indent([
        'internal;',
        `proxy_pass ${schemeOf('backend')}://${upstreamBlockName('backend')}${SESSION_CHECK_PATH};`,
        'proxy_pass_request_body off;',
        'proxy_pass_request_headers off;',
        'proxy_set_header Authorization "Bearer $codeagent_session_token";',
        ...(perWorkspace
          ? [
              `proxy_set_header ${REQUIRE_HEADER} member;`,
              `proxy_set_header ${WORKSPACE_HEADER} $codeagent_lab_workspace;`,
              `proxy_set_header ${ACCESS_HEADER} $codeagent_lab_access;`,
            ]
          : [`proxy_set_header ${REQUIRE_HEADER} system_admin;`]),
        'proxy_set_header X-Request-Id $codeagent_request_id;',
        'proxy_set_header X-Forwarded-For $remote_addr;',
        'proxy_set_header Accept application/json;',
        'proxy_set_header Connection "";',
        'proxy_read_timeout 10s;',
      ]),
      '}',
      'location = /_codeagent/log-in {',
      ...indent(['internal;', ...toLogin, ...answer(401, json({ error: 'unauthorized', message: MESSAGES.jupyterLogIn }), false)]),
      '}',
      ...(perWorkspace
        ? [
            'location = /_codeagent/no-workspace {',
            ...indent(['internal;', ...answer(404, json({ error: 'not_found', message: MESSAGES.jupyterNoWorkspace }), false)]),
            '}',
          ]
        : []),
      'location = /_codeagent/cross-site {',
      ...indent(['internal;', ...answer(403, json({ error: 'forbidden', message: MESSAGES.jupyterCrossSite }), false)]),
      '}',
      'location @codeagent_jupyter_401 {',
      ...indent([
        ...toLogin,
        ...answer(
          401,
          json({
            error: 'unauthorized',
            message: 'the session is not valid (logged out, expired or revoked): log in again (POST /api/v1/auth/login), then open /jupyter/ again',
          }),
          false,
        ),
      ]),
      '}',
      'location @codeagent_jupyter_403 {',
      ...indent(
        perWorkspace
          ? [
              'if ($codeagent_refusal = not_found) {',
              ...indent(answer(404, json({ error: 'not_found', message: MESSAGES.jupyterNotMember }), false)),
              '}',
              ...answer(403, json({ error: 'forbidden', message: MESSAGES.jupyterReadOnly }), false),
            ]
          : answer(403, json({ error: 'forbidden', message: MESSAGES.jupyterAdminsOnly }), false),
      ),
      '}',
      'location @codeagent_jupyter_unavailable {',
      ...indent(answer(502, json({ error: 'bad_gateway', message: MESSAGES.sessionUnavailable }), false)),
      '}',
    );
  }

  internal.push(
    'location = /_codeagent/ambiguous-path {',
    ...indent([
      'internal;',
      ...answer(400, json({ error: 'invalid_request', message: 'the request path must not contain a . or .. segment (in any encoding) or a backslash' })),
    ]),
    '}',
  );
  const guard = ['if ($codeagent_ambiguous_path) {', '  rewrite ^ /_codeagent/ambiguous-path last;', '}'];
  add(
    'server {',
    ...indent([`listen ${listenAddress(opts.listen.host, opts.listen.port)};`, 'server_name _;', '', ...guard, '', ...locations, '', ...internal]),
    '}',
  );

  const header = [
    "# Generated by `codeagent nginx-config` from the gateway's route table (services/gateway/src/routes.ts).",
    '# Render it again after a change of settings instead of editing it. It holds JUPYTERLAB_TOKEN: keep it private.',
  ];
  if (opts.httpOnly) return [...header, ...http, ''].join('\n');
  return [
    ...header,
    `worker_processes ${opts.workerProcesses ?? 'auto'};`,
    `pid ${runDir}/nginx.pid;`,
    `error_log ${errorLog} warn;`,
    'events {',
    `  worker_connections ${opts.workerConnections ?? 4096};`,
    '}',
    'http {',
    ...indent(http),
    '}',
    '',
  ].join('\n');
}

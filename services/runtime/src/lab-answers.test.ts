// A workspace's Jupyter server taken over by its own kernel (same uid, same sandbox: user code can
// stop the server and answer on its socket): what reaches the browser (decision 0245).
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FILES_POLICY, browserOrigin, labPageCsp } from './lab-answers.js';
import { defaultLabHost } from './lab-host.js';
import { labProxy, type LabProxy } from './lab-proxy.js';
import { CHECKED_ANSWER_MAX } from './relay.js';
import type { JupyterPool, JupyterServerRef } from './servers.js';

const TOKEN = 'lab-token';
const WS = '33333333-3333-4333-8333-333333333333';
const EVIL = 'window.PWNED = document.cookie';
const host = defaultLabHost();
/** How many answers the hostile server began and never ended were closed by the runtime. */
const held = { closed: 0 };

/** What the hostile server answers: script everywhere, its own CSP, a plural rule and a schema that are code. */
function hostile(req: IncomingMessage, res: ServerResponse): unknown {
  const path = (req.url ?? '').split('?')[0]!.replace(`/jupyter/${WS}`, '');
  const send = (type: string, body: string, headers: Record<string, string> = {}) => res.writeHead(200, { 'content-type': type, ...headers }).end(body);
  if (path === '/lab/api/settings' && req.url?.includes('huge')) {
    res.writeHead(200, { 'content-type': 'application/json' });
    const chunk = Buffer.alloc(1024 * 1024, 0x20);
    let sent = 0;
    const pump = () => {
      while (sent <= CHECKED_ANSWER_MAX && res.write(chunk)) sent += chunk.length;
      if (sent <= CHECKED_ANSWER_MAX) res.once('drain', pump);
      else res.end();
    };
    res.on('error', () => undefined);
    return pump();
  }
  if (req.url?.includes('redirect')) return res.writeHead(302, { location: `/jupyter/${WS}/files/comma.js` }).end();
  if (req.url?.includes('away')) return res.writeHead(302, { location: 'https://evil.example/' }).end();
  if (req.url?.includes('cut')) {
    res.writeHead(200, { 'content-type': 'text/plain', 'content-length': '100' }).write('ab');
    return setTimeout(() => req.socket.destroy(), 50);
  }
  if (req.url?.includes('status99')) return req.socket.end('HTTP/1.1 099 X\r\nContent-Length: 0\r\n\r\n');
  if (req.url?.includes('held')) {
    res.on('close', () => held.closed++);
    return res.writeHead(200, { 'content-type': 'application/json' }).write('{"settings": [');
  }
  if (path === '/lab/api/settings' && req.url?.includes('dup')) {
    const entry = { id: '@jupyterlab/notebook-extension:tracker', schema: {}, raw: '{}', settings: {} };
    return send('application/json', JSON.stringify({ settings: Array.from({ length: 5000 }, () => entry) }));
  }
  if (path === '/files/comma.js') return send('text/plain, text/javascript', EVIL);
  if (path === '/lab/api/settings')
    return send(
      'application/json',
      JSON.stringify({
        settings: [
          { id: '@jupyterlab/apputils-extension:themes', schema: { type: 'object', properties: { x: { pattern: `"+${EVIL}+"` } } }, raw: '{}', settings: {} },
          { id: '@evil/extension:plugin', schema: { type: 'object' }, raw: '{}', settings: {} },
          { id: '@jupyterlab/translation-extension:plugin', schema: {}, raw: '{"locale": "%2e%2e/evil"}', settings: { locale: 'en' } },
          // Written by an editor (or the kernel): Shift+Enter in everyone's lab fetches the platform's API with their session.
          {
            id: '@jupyterlab/shortcuts-extension:shortcuts',
            schema: {},
            raw: `{
              // JSON5, as JupyterLab reads it
              shortcuts: [{command: 'filebrowser:open-url', keys: ['Shift Enter'], selector: '.jp-Notebook', args: {url: '/api/v1/platform/users'}}],
              'other': 1,
            }`,
            settings: {},
          },
          {
            id: '@jupyterlab/notebook-extension:panel',
            schema: {},
            raw: '{"toolbar": [{"name": "x", "command": "filebrowser:open-url"}], "kept": true}',
            settings: {},
          },
          { id: '@jupyterlab/mainmenu-extension:plugin', schema: {}, raw: 'not json at all', settings: { menus: [{ id: 'evil' }] } },
        ],
      }),
    );
  if (path === '/lab/api/settings/@jupyterlab/apputils-extension:themes')
    return send('application/json', JSON.stringify({ id: '@jupyterlab/apputils-extension:themes', schema: { evil: EVIL }, raw: '{}', settings: {} }));
  if (path === '/lab/api/settings/garbage') return send('application/json', `<script>${EVIL}</script>`);
  if (path.startsWith('/lab/api/translations'))
    return send('application/json', JSON.stringify({ data: { '': { plural_forms: `nplurals=2; plural=(n != 1); ${EVIL}` } } }));
  if (path.startsWith('/files/'))
    return send('text/html', `<script>${EVIL}</script>`, { 'content-security-policy': 'sandbox allow-scripts allow-same-origin' });
  if (path.startsWith('/api/'))
    return send('application/javascript', EVIL, {
      'set-cookie': 'session=attacker; Path=/',
      'clear-site-data': '"cookies", "storage"',
      refresh: '0; url=https://evil.example/',
      'access-control-allow-origin': 'https://evil.example',
      'access-control-allow-credentials': 'true',
      'strict-transport-security': 'max-age=31536000',
      etag: '"kept"',
    });
  // The lab's pages, its assets and anything else: script.
  return send(path.endsWith('.js') ? 'application/javascript' : 'text/html', path.endsWith('.js') ? EVIL : `<script>${EVIL}</script>`, {
    'content-security-policy': "script-src * 'unsafe-inline'",
  });
}

describe('a taken-over workspace server behind the lab proxy', () => {
  let dir: string;
  let fake: Server;
  let lab: LabProxy;
  let ownOrigin: LabProxy;
  let front: Server;
  let base: string;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'lab-answers-'));
    const socket = join(dir, 'jupyter.sock');
    fake = createServer(hostile);
    fake.on('upgrade', (req, sock: Socket) => {
      if (req.url?.includes('bare-lf'))
        return sock.end('HTTP/1.1 101 Switching Protocols\nSet-Cookie: session=attacker; Path=/\nUpgrade: websocket\r\nsec-websocket-accept: x\r\n\r\nframes');
      if (req.url?.includes('refused')) return sock.end('HTTP/1.1 404 Not Found\r\nSet-Cookie: session=attacker; Path=/\r\nContent-Length: 0\r\n\r\n');
      return sock.end(
        'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSet-Cookie: session=attacker; Path=/\r\nClear-Site-Data: "cookies"\r\nsec-websocket-accept: x\r\n\r\nframes',
      );
    });
    await new Promise<void>((r) => fake.listen(socket, r));
    const ref = { workspaceId: WS, running: true, touch: () => undefined, socket: { path: socket, token: 'inner', basePath: `/jupyter/${WS}/` } };
    const pool = {
      lab: host,
      server: () => Promise.resolve(ref as unknown as JupyterServerRef),
      running: () => [],
      status: () => ({ state: 'running' }),
      stop: () => Promise.resolve(),
    } as JupyterPool;
    lab = labProxy({ pool, token: TOKEN, log: pino({ level: 'silent' }) });
    // The same workspace with LAB_ORIGIN (decision 0263).
    ownOrigin = labProxy({
      pool,
      token: TOKEN,
      log: pino({ level: 'silent' }),
      labOrigins: { protocol: 'https:', suffix: 'labs.example:8443', platform: 'https://example' },
    });
    front = createServer((req, res) => (req.headers['x-test-own-origin'] ? ownOrigin : lab).request(req, res));
    front.on('upgrade', (req, socket: Socket, head: Buffer) => lab.upgrade(req, socket, head));
    await new Promise<void>((r) => front.listen(0, '127.0.0.1', r));
    const address = front.address() as { port: number };
    base = `http://127.0.0.1:${address.port}`;
  });
  afterAll(async () => {
    lab?.closeAll();
    await new Promise((r) => front?.close(r));
    await new Promise((r) => fake?.close(r));
    rmSync(dir, { recursive: true, force: true });
  });

  const get = (path: string, headers: Record<string, string> = {}, signal?: AbortSignal) =>
    fetch(`${base}/jupyter/${WS}${path}`, {
      signal,
      headers: { authorization: `token ${TOKEN}`, 'x-forwarded-proto': 'https', 'x-forwarded-host': 'lab.example:8443', ...headers },
    });

  it("serves JupyterLab's page itself: its config names the installed scripts, its CSP allows those paths only", async () => {
    for (const path of ['/lab', '/lab/tree/a%20b.ipynb', '/lab/workspaces/mine', '/doc/tree/x.ipynb']) {
      const res = await get(path, { accept: 'text/html' });
      expect(res.status).toBe(200);
      const html = await res.text();
      expect(html).not.toContain(EVIL);
      const csp = res.headers.get('content-security-policy')!;
      expect(csp).toBe(labPageCsp('https://lab.example:8443', `/jupyter/${WS}/`));
      expect(csp).toContain(
        `script-src 'unsafe-eval' https://lab.example:8443/jupyter/${WS}/static/codeagent_lab/ https://lab.example:8443/jupyter/${WS}/lab/extensions/;`,
      );
      expect(csp.split(';')[0]).not.toMatch(/'self'|unsafe-inline|\*/);
      // An output's form would post to the platform's API with the member's cookie; its frame
      // would lay a page of the platform over a button of its own.
      expect(csp).toContain("form-action 'none'");
      expect(csp).toContain(`frame-src https://lab.example:8443/jupyter/${WS}/files/;`);
      const config = JSON.parse(/<script id="jupyter-config-data" type="application\/json">(.*?)<\/script>/s.exec(html)![1]!) as Record<string, unknown>;
      expect(config).toMatchObject({
        baseUrl: `/jupyter/${WS}/`,
        fullStaticUrl: `/jupyter/${WS}/static/codeagent_lab`,
        fullLabextensionsUrl: `/jupyter/${WS}/lab/extensions`,
        fullSettingsUrl: `/jupyter/${WS}/lab/api/settings`,
        fullTranslationsApiUrl: `/jupyter/${WS}/lab/api/translations`,
      });
      if (path.includes('/tree/')) expect(config.treePath).toBe(path.includes('a%20b') ? 'a b.ipynb' : 'x.ipynb');
      expect(config.mode).toBe(path.startsWith('/doc') ? 'single-document' : 'multiple-document');
    }
    // Any other path of the app is its page, which says "not found" (jupyterlab_server's fallthrough); a trailing slash goes.
    const other = await get('/lab/workspaces/my.ws', { accept: 'text/html' });
    expect(other.headers.get('content-security-policy')).toBe(labPageCsp('https://lab.example:8443', `/jupyter/${WS}/`));
    expect(await other.text()).toContain(`"notFoundUrl":"/jupyter/${WS}/lab/workspaces/my.ws"`);
    const slash = await fetch(`${base}/jupyter/${WS}/lab/tree/x.ipynb/?a=1`, { redirect: 'manual', headers: { authorization: `token ${TOKEN}` } });
    expect(slash.status).toBe(302);
    expect(slash.headers.get('location')).toBe(`/jupyter/${WS}/lab/tree/x.ipynb?a=1`);
    // A tree path cannot end the config's script element.
    const html = await (await get('/lab/tree/%3C%2Fscript%3E%3Cscript%3Ealert(1)%3C%2Fscript%3E.ipynb')).text();
    expect(html).not.toContain('</script><script>alert');
    expect(html).toContain('\\u003c/script\\u003e');
  });

  it('serves the installed scripts, styles and themes, never the server’s', async () => {
    const index = readFileSync(join(host.hostDir, 'build', 'static', 'index.html'), 'utf8');
    const main = /\/(main\.[0-9a-f]+\.js)"/.exec(index)![1]!;
    const res = await get(`/static/codeagent_lab/${main}?v=1`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/javascript; charset=utf-8');
    expect(res.headers.get('cache-control')).toContain('immutable');
    expect(Buffer.from(await res.arrayBuffer()).equals(readFileSync(join(host.hostDir, 'build', 'static', main)))).toBe(true);
    expect((await get('/lab/api/themes/@jupyterlab/theme-light-extension/index.css')).status).toBe(200);
    // Not an installed file: 404 here, never the server's script. A browser compares the
    // percent-decoded path with the page's CSP: every spelling of the script paths is answered here.
    for (const path of [
      '/static/codeagent_lab/evil.js',
      '/static/codeagent_lab/index.html',
      '/lab/extensions/evil/static/remoteEntry.js',
      '/lab/extensions/x/package.json',
      '/lab%2Fextensions/x/static/redirect.js',
      '/lab/%65xtensions/x/static/redirect.js',
      '/static%2Fcodeagent_lab/redirect.js',
      '/static/CODEAGENT_LAB/redirect.js',
      '/static/codeagent_lab/x%2F..%2F..%2Ffiles%2Fcomma.js',
      '/lab/api/themes/%FF/redirect.css',
    ]) {
      const miss = await get(path);
      // (400: a dot segment in any spelling, refused before anything else.)
      expect([400, 404], path).toContain(miss.status);
      expect(await miss.text()).not.toContain(EVIL);
    }
    expect((await fetch(`${base}/jupyter/${WS}/static/codeagent_lab/${main}`, { method: 'POST', headers: { authorization: `token ${TOKEN}` } })).status).toBe(
      405,
    );
  });

  it("answers translations itself (a language pack's plural rule is compiled as code)", async () => {
    const res = await get('/lab/api/translations/xx_XX');
    expect(await res.json()).toEqual({ data: {}, message: "Language pack 'xx_XX' not installed!" });
    // A locale is a user setting (the server's data): any path under the API is answered here.
    for (const path of ['/lab/api/translations/xx/evil', '/lab/api/translations/%78x%2Fevil', '/lab/api/Translations/xx', '/lab/api/translations-evil']) {
      const deep = await get(path);
      expect(deep.status, path).toBe(200);
      expect(JSON.stringify(await deep.json()), path).not.toContain('plural');
    }
    expect(await (await get('/lab/api/translations/')).json()).toEqual({ data: { en: { displayName: 'English', nativeName: 'English' } }, message: '' });
  });

  it('replaces the settings’ schemas by the installed ones and leaves out plugins that are not installed', async () => {
    const installed = JSON.parse(readFileSync(join(host.hostDir, 'build', 'schemas', '@jupyterlab', 'apputils-extension', 'themes.json'), 'utf8')) as unknown;
    const list = (await (await get('/lab/api/settings')).json()) as { settings: Array<{ id: string; schema: unknown }> };
    expect(list.settings.map((s) => s.id)).toEqual([
      '@jupyterlab/apputils-extension:themes',
      '@jupyterlab/translation-extension:plugin',
      '@jupyterlab/shortcuts-extension:shortcuts',
      '@jupyterlab/notebook-extension:panel',
      '@jupyterlab/mainmenu-extension:plugin',
    ]);
    expect(list.settings[0]!.schema).toEqual(installed);
    // The locale is a URL JupyterLab fetches code from: the defaults, whatever the server says.
    expect(list.settings[1]).toMatchObject({ raw: '{}', settings: {} });
    // Settings that bind commands (shortcuts, toolbars, menus) are the installed defaults (decision 0249); the rest stays.
    expect(list.settings[2]).toMatchObject({ raw: JSON.stringify({ other: 1 }, null, 2), settings: { other: 1 } });
    expect(list.settings[3]).toMatchObject({ settings: { kept: true } });
    expect(JSON.parse((list.settings[3] as unknown as { raw: string }).raw)).toEqual({ kept: true });
    expect(list.settings[4]).toMatchObject({ raw: '{}', settings: {} });
    expect(JSON.stringify(list)).not.toContain('open-url');
    const one = (await (await get('/lab/api/settings/@jupyterlab/apputils-extension:themes')).json()) as { schema: unknown };
    expect(one.schema).toEqual(installed);
    const garbage = await get('/lab/api/settings/garbage');
    expect(garbage.status).toBe(502);
    expect(await garbage.text()).not.toContain(EVIL);
    // An answer without end is cut at the limit, not held.
    const huge = await get('/lab/api/settings?huge=1');
    expect(huge.status).toBe(502);
    // A redirect would take the browser to an answer that is not checked.
    expect((await get('/lab/api/settings?redirect=1')).status).toBe(502);
    // A client that leaves does not leave its held answer behind: the server's side is closed.
    const before = held.closed;
    const aborting = new AbortController();
    const pending = get('/lab/api/settings?held=1', {}, aborting.signal).catch(() => undefined);
    await new Promise((r) => setTimeout(r, 300));
    aborting.abort();
    await pending;
    for (let i = 0; i < 50 && held.closed === before; i++) await new Promise((r) => setTimeout(r, 50));
    expect(held.closed).toBe(before + 1);
    // One plugin named 5000 times is one plugin (its schema is not multiplied).
    const dup = (await (await get('/lab/api/settings?dup=1')).json()) as { settings: unknown[] };
    expect(dup.settings).toHaveLength(1);
  });

  it('every other answer is sandboxed (no flag of the server widens it) and never a script', async () => {
    const file = await get('/files/page.html');
    const csp = file.headers.get('content-security-policy')!;
    // Two policies: the server's and ours; a browser enforces both, so `allow-same-origin` is void.
    expect(csp).toBe("sandbox allow-scripts allow-same-origin, sandbox allow-scripts; connect-src 'none'; form-action 'none'");
    const api = await get('/api/contents');
    expect(api.headers.get('content-type')).toBe('text/plain; charset=utf-8');
    // The server's cookies would be the platform's (path `/`): none reaches the browser, nor any
    // header that acts on the origin; what describes the content stays.
    for (const name of [
      'set-cookie',
      'clear-site-data',
      'refresh',
      'access-control-allow-origin',
      'access-control-allow-credentials',
      'strict-transport-security',
    ])
      expect(api.headers.get(name), name).toBeNull();
    expect(api.headers.get('etag')).toBe('"kept"');
    // A redirect to another site is not the platform's to give; one inside the lab is kept.
    const manual = (path: string) => fetch(`${base}/jupyter/${WS}${path}`, { redirect: 'manual', headers: { authorization: `token ${TOKEN}` } });
    expect((await manual('/api/away')).headers.get('location')).toBeNull();
    expect((await manual('/api/redirect')).headers.get('location')).toBe(`/jupyter/${WS}/files/comma.js`);
    // An answer the server cuts short ends the client's (it waited for the rest).
    const cut = await get('/api/cut');
    await expect(Promise.race([cut.text(), new Promise((r) => setTimeout(() => r('still waiting'), 5000))])).rejects.toThrow();
    // A status Node's writer refuses (it ended the runtime): 502.
    expect((await get('/api/status99')).status).toBe(502);
    // A list of types: a browser would keep the last (a script's).
    expect((await get('/files/comma.js')).headers.get('content-type')).toBe('text/plain; charset=utf-8');
    expect(api.headers.get('x-content-type-options')).toBe('nosniff');
    expect(api.headers.get('content-security-policy')).toBe('sandbox');
    // A lab path the trusted side does not answer is the server's: sandboxed too.
    const other = await get('/lab/api/workspaces/x.js');
    expect(other.headers.get('content-security-policy')).toBe("script-src * 'unsafe-inline', sandbox");
    expect(other.headers.get('content-type')).toBe('text/plain; charset=utf-8');
  });

  it("a websocket's handshake answer reaches the browser as a handshake only: no cookie, no other header, no bare-LF lines", async () => {
    const port = (front.address() as { port: number }).port;
    const handshake = (path: string) =>
      new Promise<string>((resolve, reject) => {
        const sock = connect(port, '127.0.0.1');
        let got = '';
        sock.on('data', (c: Buffer) => (got += c.toString('latin1')));
        sock.on('close', () => resolve(got));
        sock.on('error', reject);
        sock.write(
          `GET /jupyter/${WS}/api/kernels/${path}/channels HTTP/1.1\r\nHost: x\r\nAuthorization: token ${TOKEN}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n`,
        );
      });
    const raw = await handshake('k');
    expect(raw).toBe('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nsec-websocket-accept: x\r\n\r\nframes');
    // Lines that end in a bare LF would carry a cookie inside the status line: refused.
    expect(await handshake('bare-lf')).toMatch(/^HTTP\/1\.1 502 /);
    // A refusal keeps its status, nothing else.
    const refused = await handshake('refused');
    expect(refused).toMatch(/^HTTP\/1\.1 404 /);
    expect(refused.toLowerCase()).not.toContain('set-cookie');
  });

  it("lets outputs run their scripts only at the workspace's own lab origin (LAB_ORIGIN, decision 0263); every other answer stays sandboxed", async () => {
    const at = async (host: string, path = '/lab') =>
      (await get(path, { accept: 'text/html', 'x-forwarded-host': host, 'x-test-own-origin': '1' })).headers.get('content-security-policy')!;
    const own = await at(`${WS}.labs.example:8443`);
    expect(own).toBe(labPageCsp(`https://${WS}.labs.example:8443`, `/jupyter/${WS}/`, `https://${WS}.labs.example:8443`));
    expect(own).toMatch(
      /^script-src 'self' 'unsafe-inline' 'unsafe-eval' blob: data: https:; frame-src 'self' blob: data: https:; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'self'$/,
    );
    // The platform's host, another workspace's lab host, or no LAB_ORIGIN: JupyterLab's scripts only.
    for (const host of ['lab.example:8443', `99999999-1111-4222-8333-444455556666.labs.example:8443`, `${WS}.labs.example:8444`]) {
      expect(await at(host), host).toBe(labPageCsp(`https://${host}`, `/jupyter/${WS}/`));
    }
    expect((await get('/lab', { accept: 'text/html', 'x-forwarded-host': `${WS}.labs.example:8443` })).headers.get('content-security-policy')).toBe(
      labPageCsp(`https://${WS}.labs.example:8443`, `/jupyter/${WS}/`),
    );
    // What the server answers keeps its sandbox at the lab's own origin too.
    expect(await at(`${WS}.labs.example:8443`, '/files/x.html')).toContain(FILES_POLICY);
    expect(await at(`${WS}.labs.example:8443`, '/nbconvert/html/x.ipynb')).toMatch(/(^|, )sandbox$/);
  });

  it('allows no script at all when the origin the gateway vouches for is not a plain scheme and host', () => {
    expect(browserOrigin({ 'x-forwarded-proto': 'https', 'x-forwarded-host': 'a.example * data:' })).toBeUndefined();
    expect(browserOrigin({ 'x-forwarded-proto': 'javascript', 'x-forwarded-host': 'a.example' })).toBeUndefined();
    expect(browserOrigin({ host: '127.0.0.1:8080' })).toBe('http://127.0.0.1:8080');
    expect(browserOrigin({ 'x-forwarded-proto': 'https', 'x-forwarded-host': '[::1]:443' })).toBe('https://[::1]:443');
    expect(labPageCsp(undefined, '/jupyter/')).toMatch(/^script-src 'none';/);
  });
});

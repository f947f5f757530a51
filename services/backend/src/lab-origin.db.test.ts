// Decision 0263: each workspace's JupyterLab on a host of its own (LAB_ORIGIN). The real gateway
// and backend (real PostgreSQL); stand-ins for the lab (the runtime) and the bridge, which record
// what reaches them. A browser's way in (platform page → lab host → ticket at the platform → pass
// at the lab host), and what a hostile member, a non-member and another workspace's lab get.
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import type { FastifyInstance } from 'fastify';
import { buildGatewayApp } from '@codeagent/gateway';
import { freePort } from '@codeagent/service-kit/http';
import { addMembers, bearer, createAndLogin, createWorkspace, startTestBackend, type TestBackend } from './testing.js';

const LAB_TOKEN = 'lab-token-of-the-origin-test';

interface Seen {
  url: string;
  method: string;
  headers: IncomingHttpHeaders;
}

/** A stand-in component that answers 200 with what it saw, and keeps it. */
async function standIn(): Promise<{ server: Server; url: string; seen: Seen[] }> {
  const seen: Seen[] = [];
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      seen.push({ url: req.url ?? '', method: req.method ?? '', headers: req.headers });
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ url: req.url }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen };
}

describe('JupyterLab on an origin of its own per workspace (LAB_ORIGIN, decision 0263)', () => {
  let b: TestBackend;
  let backendUrl: string;
  let gateway: FastifyInstance;
  let lab: Awaited<ReturnType<typeof standIn>>;
  let bridge: Awaited<ReturnType<typeof standIn>>;
  let port: number;
  let platform: string;
  let wsA: string;
  let wsB: string;
  let editor: { id: string; token: string };
  let viewer: { id: string; token: string };
  let stranger: { id: string; token: string };
  const hostOf = (ws: string) => `${ws}.lab.localhost:${port}`;

  /** One request to the gateway as a browser at `host` would send it; nothing followed. */
  const call = async (host: string, path: string, init: { method?: string; cookie?: string; headers?: Record<string, string>; body?: string } = {}) => {
    const res = await request(`http://127.0.0.1:${port}${path}`, {
      method: (init.method ?? 'GET') as 'GET',
      headers: { host, ...(init.cookie ? { cookie: init.cookie } : {}), ...init.headers },
      ...(init.body === undefined ? {} : { body: init.body }),
    });
    const text = await res.body.text();
    const setCookie = res.headers['set-cookie'];
    return {
      status: res.statusCode,
      location: res.headers.location as string | undefined,
      cookies: setCookie === undefined ? [] : [setCookie].flat(),
      csp: res.headers['content-security-policy'] as string | undefined,
      text,
    };
  };
  const page = { accept: 'text/html' };
  /** `name=value` of the cookie a Set-Cookie list sets. */
  const cookieValue = (cookies: string[], name: string) =>
    cookies
      .find((c) => c.startsWith(`${name}=`))
      ?.split(';')[0]
      ?.slice(name.length + 1);

  /** Where a lab's host sends a browser without a pass: the platform's ticket address (path and query). */
  const startAtLab = async (ws: string): Promise<string> => {
    const url = new URL((await call(hostOf(ws), `/jupyter/${ws}/lab`, { headers: page })).location!);
    return `${url.pathname}${url.search}`;
  };

  /** A browser's way into `ws`'s lab with `session`: the pass cookie, and the state cookie it used. */
  const enter = async (
    ws: string,
    session: string,
    opts: { exchange?: boolean } = {},
  ): Promise<{ pass: string; state: string; ticketUrl: string; loginUrl: string }> => {
    const atPlatform = await call(platform, `/jupyter/${ws}/lab`, { cookie: `codeagent_session=${session}`, headers: page });
    expect(atPlatform.status).toBe(302);
    expect(atPlatform.location).toBe(`http://${hostOf(ws)}/jupyter/${ws}/lab`);
    const atLab = await call(hostOf(ws), `/jupyter/${ws}/lab`, { headers: page });
    expect(atLab.status).toBe(302);
    const state = cookieValue(atLab.cookies, 'codeagent_lab_state')!;
    expect(state).toMatch(/^[A-Za-z0-9_-]{32}$/);
    expect(atLab.cookies[0]).toMatch(/^codeagent_lab_state=[^;]+; Path=\/; Max-Age=600; HttpOnly; SameSite=Lax$/);
    const ticketUrl = new URL(atLab.location!);
    expect(ticketUrl.origin).toBe(`http://${platform}`);
    expect(ticketUrl.pathname).toBe(`/jupyter/${ws}/codeagent-lab-ticket`);
    // The state itself never leaves the lab's host: the platform sees its hash.
    expect(atLab.location).not.toContain(state);
    const ticket = await call(platform, `${ticketUrl.pathname}${ticketUrl.search}`, { cookie: `codeagent_session=${session}`, headers: page });
    expect(ticket.status).toBe(302);
    const loginUrl = new URL(ticket.location!);
    expect(loginUrl.origin).toBe(`http://${hostOf(ws)}`);
    expect(loginUrl.pathname).toBe(`/jupyter/${ws}/codeagent-lab-login`);
    if (opts.exchange === false)
      return { pass: '', state, ticketUrl: `${ticketUrl.pathname}${ticketUrl.search}`, loginUrl: `${loginUrl.pathname}${loginUrl.search}` };
    const login = await call(hostOf(ws), `${loginUrl.pathname}${loginUrl.search}`, { cookie: `codeagent_lab_state=${state}`, headers: page });
    expect(login.status, login.text).toBe(302);
    expect(login.location).toBe(`/jupyter/${ws}/lab`);
    const pass = cookieValue(login.cookies, 'codeagent_lab')!;
    expect(pass).toMatch(/^labp\./);
    expect(login.cookies.find((c) => c.startsWith('codeagent_lab='))).toMatch(/Path=\/; Max-Age=\d+; HttpOnly; SameSite=Lax/);
    return { pass, state, ticketUrl: `${ticketUrl.pathname}${ticketUrl.search}`, loginUrl: `${loginUrl.pathname}${loginUrl.search}` };
  };

  beforeAll(async () => {
    b = await startTestBackend();
    backendUrl = await b.app.listen({ host: '127.0.0.1', port: 0 });
    lab = await standIn();
    bridge = await standIn();
    port = await freePort();
    platform = `127.0.0.1:${port}`;
    gateway = await buildGatewayApp({
      upstreams: { backend: backendUrl, clusterAdmin: 'http://127.0.0.1:9', bridge: bridge.url },
      jupyter: { url: lab.url, token: LAB_TOKEN, perWorkspace: true },
      labOrigins: { protocol: 'http:', suffix: `lab.localhost:${port}`, platform: `http://${platform}` },
    });
    await gateway.listen({ host: '127.0.0.1', port });
    wsA = await createWorkspace(b, 'A');
    wsB = await createWorkspace(b, 'B');
    editor = await createAndLogin(b, 'lab-origin-editor@example.com');
    viewer = await createAndLogin(b, 'lab-origin-viewer@example.com');
    stranger = await createAndLogin(b, 'lab-origin-stranger@example.com');
    await addMembers(b, wsA, [
      [editor, 'editor'],
      [viewer, 'viewer'],
    ]);
    await addMembers(b, wsB, [[stranger, 'editor']]);
  });

  afterAll(async () => {
    await gateway?.close();
    await b?.close();
    lab?.server.close();
    bridge?.server.close();
  });

  it("a member gets the lab's pass through the platform, and the lab's host hands it on as the backend's credential only", async () => {
    const { pass } = await enter(wsA, editor.token);
    lab.seen.length = 0;
    const contents = await call(hostOf(wsA), `/jupyter/${wsA}/api/contents`, { cookie: `codeagent_lab=${pass}; other=1` });
    expect(contents.status, contents.text).toBe(200);
    const seen = lab.seen.at(-1)!;
    expect(seen.url).toBe(`/jupyter/${wsA}/api/contents`);
    // The lab gets its own token and the lab's host as the browser's; the pass stays at the gateway.
    expect(seen.headers.authorization).toBe(`token ${LAB_TOKEN}`);
    expect(seen.headers.cookie).toBe('other=1');
    expect(seen.headers['x-forwarded-host']).toBe(hostOf(wsA));
    expect(JSON.stringify(seen.headers)).not.toContain(pass.slice(5, 40));
    // A write of the lab's own page (same origin) is let through.
    const save = await call(hostOf(wsA), `/jupyter/${wsA}/api/contents/a.ipynb`, {
      method: 'PUT',
      cookie: `codeagent_lab=${pass}`,
      headers: { origin: `http://${hostOf(wsA)}`, 'content-type': 'application/json' },
      body: '{}',
    });
    expect(save.status, save.text).toBe(200);
    // The lab's bridge gets the pass as Bearer, and no cookie of the lab.
    const edit = await call(hostOf(wsA), `/jupyter/${wsA}/codeagent-bridge/edit`, {
      method: 'POST',
      cookie: `codeagent_lab=${pass}`,
      headers: { origin: `http://${hostOf(wsA)}`, 'content-type': 'application/json' },
      body: '{}',
    });
    expect(edit.status).toBe(200);
    expect(bridge.seen.at(-1)!.url).toBe(`/codeagent-bridge/workspaces/${wsA}/edit`);
    expect(bridge.seen.at(-1)!.headers.authorization).toBe(`Bearer ${pass}`);
    expect(bridge.seen.at(-1)!.headers.cookie).toBeUndefined();
    // The host's root is the lab's start page.
    expect((await call(hostOf(wsA), '/')).location).toBe(`/jupyter/${wsA}/lab`);
  });

  it("the platform's origin serves a lab to API clients only: pages go to the lab's host, the cookie gets 404", async () => {
    const cookie = await call(platform, `/jupyter/${wsA}/api/contents`, { cookie: `codeagent_session=${editor.token}` });
    expect(cookie.status).toBe(404);
    expect(cookie.text).toContain(`http://${hostOf(wsA)}/jupyter/${wsA}/`);
    expect((await call(platform, `/jupyter/${wsA}/api/kernels`, { method: 'POST', cookie: `codeagent_session=${editor.token}` })).status).toBe(404);
    lab.seen.length = 0;
    expect((await call(platform, `/jupyter/${wsA}/api/contents`, { headers: bearer(editor.token) })).status).toBe(200);
    expect(lab.seen).toHaveLength(1);
    // Without a session the ticket's page sends the browser to log in, and back.
    const ticketPath = await startAtLab(wsA);
    const anonymous = await call(platform, ticketPath, { headers: page });
    expect(anonymous.status).toBe(302);
    expect(anonymous.location).toBe(`/login?next=${encodeURIComponent(ticketPath)}`);
  });

  it("a lab's host serves its own lab only, and no platform route", async () => {
    const { pass } = await enter(wsA, editor.token);
    for (const path of [
      '/api/v1/auth/me',
      `/api/v1/data-resources/${wsA}/objects`,
      '/login',
      '/codeagent-bridge/providers',
      `/jupyter/${wsB}/api/contents`,
      '/jupyter/',
    ]) {
      const res = await call(hostOf(wsA), path, { cookie: `codeagent_lab=${pass}` });
      expect(res.status, path).toBe(404);
    }
    // Nor a websocket elsewhere.
    const upgrade = await call(hostOf(wsA), `/jupyter/${wsB}/api/kernels/x/channels`, {
      cookie: `codeagent_lab=${pass}`,
      headers: { connection: 'Upgrade', upgrade: 'websocket', 'sec-websocket-version': '13', 'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==' },
    }).catch(() => ({ status: 0 }));
    expect(upgrade.status).not.toBe(101);
  });

  it("the platform's session cookie is no credential at a lab's host (a sibling lab's page could have set it for the parent domain)", async () => {
    const page1 = await call(hostOf(wsA), `/jupyter/${wsA}/lab`, { cookie: `codeagent_session=${editor.token}`, headers: page });
    expect(page1.status).toBe(302);
    expect(page1.location).toContain('/codeagent-lab-ticket?lab_state=');
    lab.seen.length = 0;
    expect((await call(hostOf(wsA), `/jupyter/${wsA}/api/contents`, { cookie: `codeagent_session=${editor.token}` })).status).toBe(401);
    const { pass } = await enter(wsA, viewer.token);
    // Beside a pass, it is taken out: the request is the pass's (a viewer's: no write).
    const write = await call(hostOf(wsA), `/jupyter/${wsA}/api/contents/a.ipynb`, {
      method: 'PUT',
      cookie: `codeagent_session=${editor.token}; codeagent_lab=${pass}`,
      headers: { origin: `http://${hostOf(wsA)}`, 'content-type': 'application/json' },
      body: '{}',
    });
    expect(write.status).toBe(403);
    expect(lab.seen).toHaveLength(0);
    // Nor does it reach the bridge (which would take it).
    await call(hostOf(wsA), `/jupyter/${wsA}/codeagent-bridge/sessions`, { cookie: `codeagent_session=${editor.token}` });
    expect(bridge.seen.at(-1)!.headers.cookie).toBeUndefined();
    expect(bridge.seen.at(-1)!.headers.authorization).toBeUndefined();
  });

  it('a pass opens its own workspace only, is no user token, and another lab may not write with it', async () => {
    const { pass } = await enter(wsA, editor.token);
    // At B's host (a cookie of A's host would not even be sent there; a client could).
    expect((await call(hostOf(wsB), `/jupyter/${wsB}/api/contents`, { cookie: `codeagent_lab=${pass}` })).status).toBe(401);
    expect((await call(hostOf(wsB), `/jupyter/${wsB}/api/contents`, { headers: bearer(pass) })).status).toBe(401);
    // At the platform, as a token of the API or of another workspace's lab.
    expect((await call(platform, '/api/v1/auth/me', { headers: bearer(pass) })).status).toBe(401);
    expect((await call(platform, `/api/v1/data-resources/${wsA}/objects`, { headers: bearer(pass) })).status).toBe(401);
    expect((await call(platform, `/jupyter/${wsB}/api/contents`, { headers: bearer(pass) })).status).toBe(401);
    // Another workspace's lab is same-site (its requests carry A's cookie): no write, no websocket.
    lab.seen.length = 0;
    const fromB = await call(hostOf(wsA), `/jupyter/${wsA}/api/contents/a.ipynb`, {
      method: 'PUT',
      cookie: `codeagent_lab=${pass}`,
      headers: { origin: `http://${hostOf(wsB)}`, 'content-type': 'application/json' },
      body: '{}',
    });
    expect(fromB.status).toBe(403);
    const noOrigin = await call(hostOf(wsA), `/jupyter/${wsA}/api/kernels`, { method: 'POST', cookie: `codeagent_lab=${pass}` });
    expect(noOrigin.status).toBe(403);
    expect(lab.seen).toHaveLength(0);
  });

  it('a ticket opens the lab only for the browser it was made for (its state), and for its own workspace', async () => {
    const { state, loginUrl } = await enter(wsA, editor.token);
    // Used once (by `enter`): the same browser, with the same state, gets nothing for it again.
    const again = await call(hostOf(wsA), loginUrl, { cookie: `codeagent_lab_state=${state}` });
    expect(again.status).toBe(401);
    expect(again.text).toContain('has been used');
    // The gateway's own answers at a lab's host are documents of no origin, framed nowhere: a
    // script of the lab's page that opened the login address cannot read the ticket in it.
    expect(again.csp).toBe("default-src 'none'; sandbox; frame-ancestors 'none'");
    expect((await call(hostOf(wsA), `/jupyter/${wsB}/lab`)).csp).toBe("default-src 'none'; sandbox; frame-ancestors 'none'");
    // Another browser (another state, or none) gets nothing for a ticket either: one read from a log is useless.
    const unused = await enter(wsA, editor.token, { exchange: false });
    expect((await call(hostOf(wsA), unused.loginUrl, { cookie: 'codeagent_lab_state=another-browsers-state' })).status).toBe(401);
    expect((await call(hostOf(wsA), unused.loginUrl)).status).toBe(401);
    // (Those did not use it up.)
    expect((await call(hostOf(wsA), unused.loginUrl, { cookie: `codeagent_lab_state=${unused.state}` })).status).toBe(302);
    // At B's host, with the right state: a ticket opens its own workspace only.
    const atB = await call(hostOf(wsB), loginUrl.replace(`/jupyter/${wsA}/`, `/jupyter/${wsB}/`), { cookie: `codeagent_lab_state=${state}` });
    expect(atB.status).toBe(401);
    expect(atB.cookies.some((c) => c.startsWith('codeagent_lab='))).toBe(false);
    // A ticket is no credential of the lab, nor of the API.
    const ticket = new URL(`http://x${loginUrl}`).searchParams.get('ticket')!;
    expect(ticket).toMatch(/^labt\./);
    expect((await call(hostOf(wsA), `/jupyter/${wsA}/api/contents`, { headers: bearer(ticket) })).status).toBe(401);
    expect((await call(hostOf(wsA), `/jupyter/${wsA}/api/contents`, { cookie: `codeagent_lab=${ticket}` })).status).toBe(401);
    expect((await call(platform, '/api/v1/auth/me', { headers: bearer(ticket) })).status).toBe(401);
    // `next` stays inside the lab.
    for (const next of ['https://evil.example/', `//evil.example/jupyter/${wsA}/`, `/jupyter/${wsB}/lab`, `/jupyter/${wsA}/..%2f..%2fapi`]) {
      const fresh = await enter(wsA, editor.token, { exchange: false });
      const url = fresh.loginUrl.replace(/&next=[^&]*/, `&next=${encodeURIComponent(next)}`);
      const res = await call(hostOf(wsA), url, { cookie: `codeagent_lab_state=${fresh.state}` });
      expect(res.status, next).toBe(302);
      expect(res.location, next).toBe(next.startsWith(`/jupyter/${wsA}/..`) ? next : `/jupyter/${wsA}/lab`);
    }
  });

  it('over https the cookies are `__Host-` ones, which a sibling lab host cannot set: a tossed plain cookie is not read', async () => {
    const httpsPort = await freePort();
    const secure = await buildGatewayApp({
      upstreams: { backend: backendUrl, clusterAdmin: 'http://127.0.0.1:9', bridge: bridge.url },
      jupyter: { url: lab.url, token: LAB_TOKEN, perWorkspace: true },
      labOrigins: { protocol: 'https:', suffix: `lab.localhost:${httpsPort}`, platform: `https://${platform}` },
    });
    await secure.listen({ host: '127.0.0.1', port: httpsPort });
    try {
      const host = `${wsA}.lab.localhost:${httpsPort}`;
      const at = (path: string, cookie?: string, headers: Record<string, string> = {}) =>
        request(`http://127.0.0.1:${httpsPort}${path}`, { headers: { host, ...(cookie ? { cookie } : {}), ...headers } }).then(async (r) => ({
          status: r.statusCode,
          location: r.headers.location as string | undefined,
          cookies: [r.headers['set-cookie'] ?? []].flat(),
          text: await r.body.text(),
        }));
      const start = await at(`/jupyter/${wsA}/lab`, undefined, page);
      expect(start.cookies[0]).toMatch(/^__Host-codeagent_lab_state=[^;]+; Path=\/; Max-Age=600; HttpOnly; SameSite=Lax; Secure$/);
      const state = cookieValue(start.cookies, '__Host-codeagent_lab_state')!;
      const ticketUrl = new URL(start.location!);
      expect(ticketUrl.origin).toBe(`https://${platform}`);
      const ticket = await request(`http://127.0.0.1:${httpsPort}${ticketUrl.pathname}${ticketUrl.search}`, {
        headers: { host: platform, cookie: `codeagent_session=${editor.token}`, ...page },
      });
      await ticket.body.text();
      const loginUrl = new URL(ticket.headers.location as string);
      // A plain state cookie (what a sibling could set for the parent domain) is not the state.
      expect((await at(`${loginUrl.pathname}${loginUrl.search}`, `codeagent_lab_state=${state}`)).status).toBe(401);
      const login = await at(`${loginUrl.pathname}${loginUrl.search}`, `__Host-codeagent_lab_state=${state}`);
      expect(login.status, login.text).toBe(302);
      const pass = cookieValue(login.cookies, '__Host-codeagent_lab')!;
      expect(login.cookies.find((c) => c.startsWith('__Host-codeagent_lab='))).toMatch(/; Path=\/; Max-Age=\d+; HttpOnly; SameSite=Lax; Secure$/);
      // The attacker's own pass tossed in as a plain cookie comes first in the header, and is not read.
      const { pass: attackers } = await enter(wsA, viewer.token);
      lab.seen.length = 0;
      expect((await at(`/jupyter/${wsA}/api/contents`, `codeagent_lab=${attackers}; __Host-codeagent_lab=${pass}`)).status).toBe(200);
      expect((await at(`/jupyter/${wsA}/api/contents`, `codeagent_lab=${attackers}`)).status).toBe(401);
      // Neither name reaches the lab.
      expect(lab.seen[0]!.headers.cookie).toBeUndefined();
    } finally {
      await secure.close();
    }
  });

  it("a ticket is made only for a state a lab's host made, and nothing at the lab's origin shows one where a page's script could read it", async () => {
    // A state of the script's own choosing (its hash, unsigned or signed for another workspace or
    // with a changed hash): no ticket, so none to read from any answer and exchange elsewhere.
    const made = new URL(`http://x${await startAtLab(wsA)}`).searchParams.get('lab_state')!;
    const [hash, until, signature] = made.split('.') as [string, string, string];
    const forB = (await startAtLab(wsB)).replace(`/jupyter/${wsB}/`, `/jupyter/${wsA}/`);
    for (const path of [
      `/jupyter/${wsA}/codeagent-lab-ticket?state_hash=${'a'.repeat(43)}`,
      `/jupyter/${wsA}/codeagent-lab-ticket?lab_state=${'a'.repeat(43)}.${until}.${signature}`,
      `/jupyter/${wsA}/codeagent-lab-ticket?lab_state=${hash}.${Number(until) + 1}.${signature}`,
      forB,
    ]) {
      const res = await call(platform, path, { cookie: `codeagent_session=${editor.token}`, headers: page });
      expect(res.status, path).toBe(400);
      expect(res.location).toBeUndefined();
    }
    // A long `next` is not carried on (it made a head too large for the lab's host: 431).
    const long = await call(platform, `/jupyter/${wsA}/codeagent-lab-ticket?lab_state=${made}&next=/jupyter/${wsA}/${':'.repeat(6000)}`, {
      cookie: `codeagent_session=${editor.token}`,
      headers: page,
    });
    expect(long.status).toBe(302);
    expect(new URL(long.location!).searchParams.get('next')).toBe(`/jupyter/${wsA}/lab`);
    // And a head too large is answered as every other answer: a document of no origin.
    const huge = await call(hostOf(wsA), `/jupyter/${wsA}/codeagent-lab-login?ticket=x`, { headers: { 'x-pad': 'p'.repeat(20_000) } });
    expect(huge.status).toBe(431);
    expect(huge.csp).toBe("default-src 'none'; frame-ancestors 'none'; sandbox");
  });

  it("any other name under the labs' domain serves nothing, and the pass cookie holds a pass only", async () => {
    for (const host of [`evil.lab.localhost:${port}`, `lab.localhost:${port}`, `a.${wsA}.lab.localhost:${port}`]) {
      for (const path of ['/', '/login', '/api/v1/auth/me', `/jupyter/${wsA}/lab`]) {
        const res = await call(host, path, { cookie: `codeagent_session=${editor.token}`, headers: page });
        expect(res.status, `${host}${path}`).toBe(404);
      }
    }
    // A session's token in the lab's cookie is no credential there.
    expect((await call(hostOf(wsA), `/jupyter/${wsA}/api/contents`, { cookie: `codeagent_lab=${editor.token}` })).status).toBe(401);
  });

  it('a non-member gets no ticket, a viewer reads only, and a logout ends the pass at once', async () => {
    const refused = await call(platform, await startAtLab(wsA), { cookie: `codeagent_session=${stranger.token}`, headers: page });
    expect(refused.status).toBe(404);
    expect(refused.location).toBeUndefined();

    const { pass: viewerPass } = await enter(wsA, viewer.token);
    expect((await call(hostOf(wsA), `/jupyter/${wsA}/api/contents`, { cookie: `codeagent_lab=${viewerPass}` })).status).toBe(200);
    const write = await call(hostOf(wsA), `/jupyter/${wsA}/api/contents/a.ipynb`, {
      method: 'PUT',
      cookie: `codeagent_lab=${viewerPass}`,
      headers: { origin: `http://${hostOf(wsA)}`, 'content-type': 'application/json' },
      body: '{}',
    });
    expect(write.status).toBe(403);

    const session = (
      await b.app.inject({ method: 'POST', url: '/api/v1/auth/login', payload: { email: 'lab-origin-editor@example.com', password: 'password-123' } })
    ).json<{
      access_token: string;
    }>().access_token;
    const { pass } = await enter(wsA, session);
    expect((await call(hostOf(wsA), `/jupyter/${wsA}/api/contents`, { cookie: `codeagent_lab=${pass}` })).status).toBe(200);
    expect((await call(platform, '/api/v1/auth/logout', { method: 'POST', headers: bearer(session) })).status).toBe(204);
    expect((await call(hostOf(wsA), `/jupyter/${wsA}/api/contents`, { cookie: `codeagent_lab=${pass}` })).status).toBe(401);
    // A page with a pass that no longer holds starts the way in again.
    const again = await call(hostOf(wsA), `/jupyter/${wsA}/lab`, { cookie: `codeagent_lab=${pass}`, headers: page });
    expect(again.status).toBe(302);
    expect(again.location).toContain(`http://${platform}/jupyter/${wsA}/codeagent-lab-ticket?lab_state=`);
  });
});

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

  /** The form the platform's ticket page posts to a lab's login: where, the ticket and `next`. */
  const formOf = (html: string) => {
    const value = (name: string) =>
      new RegExp(`name="${name}" value="([^"]*)"`).exec(html)?.[1]?.replace(/&#(\d+);/g, (_m, c: string) => String.fromCharCode(Number(c)));
    return { action: /<form method="post" action="([^"]+)"/.exec(html)?.[1], ticket: value('ticket') ?? '', next: value('next') ?? '' };
  };

  /** The lab's login at `ws`'s host as the form posts it, with the browser's `state` cookie (if any). */
  const login = (ws: string, ticket: string, next: string, state?: string, host = hostOf(ws)) =>
    call(host, `/jupyter/${ws}/codeagent-lab-login`, {
      method: 'POST',
      ...(state === undefined ? {} : { cookie: `__Host-codeagent_lab_state=${state}` }),
      headers: { 'content-type': 'application/x-www-form-urlencoded', origin: `http://${platform}` },
      body: new URLSearchParams({ ticket, next }).toString(),
    });

  /** A browser's way into `ws`'s lab with `session`: the pass cookie, the state cookie it used, and the form it posted. */
  const enter = async (
    ws: string,
    session: string,
    opts: { exchange?: boolean } = {},
  ): Promise<{ pass: string; state: string; ticket: string; next: string }> => {
    const atPlatform = await call(platform, `/jupyter/${ws}/lab`, { cookie: `codeagent_session=${session}`, headers: page });
    expect(atPlatform.status).toBe(302);
    expect(atPlatform.location).toBe(`http://${hostOf(ws)}/jupyter/${ws}/lab`);
    const atLab = await call(hostOf(ws), `/jupyter/${ws}/lab`, { headers: page });
    expect(atLab.status).toBe(302);
    const state = cookieValue(atLab.cookies, '__Host-codeagent_lab_state')!;
    expect(state).toMatch(/^[A-Za-z0-9_-]{32}$/);
    expect(atLab.cookies[0]).toMatch(/^__Host-codeagent_lab_state=[^;]+; Path=\/; Max-Age=600; HttpOnly; Secure; SameSite=None$/);
    const ticketUrl = new URL(atLab.location!);
    expect(ticketUrl.origin).toBe(`http://${platform}`);
    expect(ticketUrl.pathname).toBe(`/jupyter/${ws}/codeagent-lab-ticket`);
    // The state itself never leaves the lab's host: the platform sees its hash.
    expect(atLab.location).not.toContain(state);
    const ticketPage = await call(platform, `${ticketUrl.pathname}${ticketUrl.search}`, { cookie: `codeagent_session=${session}`, headers: page });
    // The ticket goes in a form posted to the lab's login, never in an address.
    expect(ticketPage.status).toBe(200);
    expect(ticketPage.location).toBeUndefined();
    expect(ticketPage.csp).toMatch(
      new RegExp(`^default-src 'none'; script-src 'sha256-[^']+'; form-action http://${hostOf(ws)}; frame-ancestors 'none'; base-uri 'none'$`),
    );
    const form = formOf(ticketPage.text);
    expect(form.action).toBe(`http://${hostOf(ws)}/jupyter/${ws}/codeagent-lab-login`);
    expect(form.ticket).toMatch(/^labt\./);
    if (opts.exchange === false) return { pass: '', state, ticket: form.ticket, next: form.next };
    const done = await login(ws, form.ticket, form.next, state);
    expect(done.status, done.text).toBe(303);
    expect(done.location).toBe(`/jupyter/${ws}/lab`);
    const pass = cookieValue(done.cookies, '__Host-codeagent_lab')!;
    expect(pass).toMatch(/^labp\./);
    expect(done.cookies.find((c) => c.startsWith('__Host-codeagent_lab='))).toMatch(/; Path=\/; Max-Age=\d+; HttpOnly; Secure; SameSite=Lax$/);
    return { pass, state, ticket: form.ticket, next: form.next };
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
    const contents = await call(hostOf(wsA), `/jupyter/${wsA}/api/contents`, { cookie: `__Host-codeagent_lab=${pass}; other=1` });
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
      cookie: `__Host-codeagent_lab=${pass}`,
      headers: { origin: `http://${hostOf(wsA)}`, 'content-type': 'application/json' },
      body: '{}',
    });
    expect(save.status, save.text).toBe(200);
    // The lab's bridge gets the pass as Bearer, and no cookie of the lab.
    const edit = await call(hostOf(wsA), `/jupyter/${wsA}/codeagent-bridge/edit`, {
      method: 'POST',
      cookie: `__Host-codeagent_lab=${pass}`,
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
      const res = await call(hostOf(wsA), path, { cookie: `__Host-codeagent_lab=${pass}` });
      expect(res.status, path).toBe(404);
    }
    // Nor a websocket elsewhere.
    const upgrade = await call(hostOf(wsA), `/jupyter/${wsB}/api/kernels/x/channels`, {
      cookie: `__Host-codeagent_lab=${pass}`,
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
      cookie: `codeagent_session=${editor.token}; __Host-codeagent_lab=${pass}`,
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
    expect((await call(hostOf(wsB), `/jupyter/${wsB}/api/contents`, { cookie: `__Host-codeagent_lab=${pass}` })).status).toBe(401);
    expect((await call(hostOf(wsB), `/jupyter/${wsB}/api/contents`, { headers: bearer(pass) })).status).toBe(401);
    // At the platform, as a token of the API or of another workspace's lab.
    expect((await call(platform, '/api/v1/auth/me', { headers: bearer(pass) })).status).toBe(401);
    expect((await call(platform, `/api/v1/data-resources/${wsA}/objects`, { headers: bearer(pass) })).status).toBe(401);
    expect((await call(platform, `/jupyter/${wsB}/api/contents`, { headers: bearer(pass) })).status).toBe(401);
    // Another workspace's lab is same-site (its requests carry A's cookie): no write, no websocket.
    lab.seen.length = 0;
    const fromB = await call(hostOf(wsA), `/jupyter/${wsA}/api/contents/a.ipynb`, {
      method: 'PUT',
      cookie: `__Host-codeagent_lab=${pass}`,
      headers: { origin: `http://${hostOf(wsB)}`, 'content-type': 'application/json' },
      body: '{}',
    });
    expect(fromB.status).toBe(403);
    const noOrigin = await call(hostOf(wsA), `/jupyter/${wsA}/api/kernels`, { method: 'POST', cookie: `__Host-codeagent_lab=${pass}` });
    expect(noOrigin.status).toBe(403);
    expect(lab.seen).toHaveLength(0);
  });

  it('a ticket opens the lab only for the browser it was made for (its state), and for its own workspace', async () => {
    const { state, ticket, next } = await enter(wsA, editor.token);
    // Used once (by `enter`): the same browser, with the same state, gets nothing for it again.
    const again = await login(wsA, ticket, next, state);
    expect(again.status).toBe(401);
    expect(again.text).toContain('has been used');
    // The gateway's own answers at a lab's host are documents of no origin, framed nowhere.
    expect(again.csp).toBe("default-src 'none'; sandbox; frame-ancestors 'none'");
    expect((await call(hostOf(wsA), `/jupyter/${wsB}/lab`)).csp).toBe("default-src 'none'; sandbox; frame-ancestors 'none'");
    // A ticket in an address opens nothing: the login takes it from a posted form only.
    const inAddress = await call(hostOf(wsA), `/jupyter/${wsA}/codeagent-lab-login?ticket=${ticket}`, { cookie: `__Host-codeagent_lab_state=${state}` });
    expect(inAddress.status).toBe(405);
    // A form larger than a login's is not read.
    const large = await call(hostOf(wsA), `/jupyter/${wsA}/codeagent-lab-login`, {
      method: 'POST',
      cookie: `__Host-codeagent_lab_state=${state}`,
      headers: { 'content-type': 'application/x-www-form-urlencoded', origin: `http://${platform}` },
      body: `ticket=${ticket}&pad=${'p'.repeat(20_000)}`,
    });
    expect(large.status).toBe(400);
    // Posted from anywhere but the platform's page (a lab page's own script: the lab's origin), refused.
    const fresh = await enter(wsA, editor.token, { exchange: false });
    for (const origin of [`http://${hostOf(wsA)}`, `http://${hostOf(wsB)}`, 'null', undefined]) {
      const res = await call(hostOf(wsA), `/jupyter/${wsA}/codeagent-lab-login`, {
        method: 'POST',
        cookie: `__Host-codeagent_lab_state=${fresh.state}`,
        headers: { 'content-type': 'application/x-www-form-urlencoded', ...(origin === undefined ? {} : { origin }) },
        body: new URLSearchParams({ ticket: fresh.ticket, next: fresh.next }).toString(),
      });
      expect(res.status, String(origin)).toBe(403);
      expect(res.cookies).toEqual([]);
    }
    // Another browser (another state, or none) gets nothing for a ticket either: one read from a log is useless.
    const unused = await enter(wsA, editor.token, { exchange: false });
    expect((await login(wsA, unused.ticket, unused.next, 'another-browsers-state')).status).toBe(401);
    expect((await login(wsA, unused.ticket, unused.next)).status).toBe(401);
    // A plain state cookie (what a sibling lab's page could set for the parent domain) is not the state.
    const plain = await call(hostOf(wsA), `/jupyter/${wsA}/codeagent-lab-login`, {
      method: 'POST',
      cookie: `codeagent_lab_state=${unused.state}`,
      headers: { 'content-type': 'application/x-www-form-urlencoded', origin: `http://${platform}` },
      body: new URLSearchParams({ ticket: unused.ticket }).toString(),
    });
    expect(plain.status).toBe(401);
    // At B's host, with the right state: a ticket opens its own workspace only.
    const atB = await login(wsB, unused.ticket, unused.next, unused.state);
    expect(atB.status).toBe(401);
    expect(atB.cookies.some((c) => c.startsWith('__Host-codeagent_lab='))).toBe(false);
    // (None of those used it up.)
    expect((await login(wsA, unused.ticket, unused.next, unused.state)).status).toBe(303);
    // A ticket is no credential of the lab, nor of the API.
    expect((await call(hostOf(wsA), `/jupyter/${wsA}/api/contents`, { headers: bearer(ticket) })).status).toBe(401);
    expect((await call(hostOf(wsA), `/jupyter/${wsA}/api/contents`, { cookie: `__Host-codeagent_lab=${ticket}` })).status).toBe(401);
    expect((await call(platform, '/api/v1/auth/me', { headers: bearer(ticket) })).status).toBe(401);
    // `next` stays inside the lab.
    for (const target of ['https://evil.example/', `//evil.example/jupyter/${wsA}/`, `/jupyter/${wsB}/lab`, `/jupyter/${wsA}/..%2f..%2fapi`]) {
      const fresh = await enter(wsA, editor.token, { exchange: false });
      const res = await login(wsA, fresh.ticket, target, fresh.state);
      expect(res.status, target).toBe(303);
      expect(res.location, target).toBe(target.startsWith(`/jupyter/${wsA}/..`) ? target : `/jupyter/${wsA}/lab`);
    }
  });

  it('a sibling lab cannot plant a plain cookie: only the `__Host-` ones are read', async () => {
    const { pass } = await enter(wsA, editor.token);
    // The attacker's own pass tossed in as a plain cookie comes first in the header, and is not read.
    const { pass: attackers } = await enter(wsA, viewer.token);
    lab.seen.length = 0;
    expect((await call(hostOf(wsA), `/jupyter/${wsA}/api/contents`, { cookie: `codeagent_lab=${attackers}; __Host-codeagent_lab=${pass}` })).status).toBe(200);
    const write = await call(hostOf(wsA), `/jupyter/${wsA}/api/contents/a.ipynb`, {
      method: 'PUT',
      cookie: `codeagent_lab=${attackers}; __Host-codeagent_lab=${pass}`,
      headers: { origin: `http://${hostOf(wsA)}`, 'content-type': 'application/json' },
      body: '{}',
    });
    // (The editor's pass, not the viewer's: the write goes through.)
    expect(write.status).toBe(200);
    expect((await call(hostOf(wsA), `/jupyter/${wsA}/api/contents`, { cookie: `codeagent_lab=${attackers}` })).status).toBe(401);
    // Neither name reaches the lab.
    expect(lab.seen[0]!.headers.cookie).toBeUndefined();
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
    expect(long.status).toBe(200);
    expect(formOf(long.text).next).toBe(`/jupyter/${wsA}/lab`);
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
    expect((await call(hostOf(wsA), `/jupyter/${wsA}/api/contents`, { cookie: `__Host-codeagent_lab=${editor.token}` })).status).toBe(401);
  });

  it('a non-member gets no ticket, a viewer reads only, and a logout ends the pass at once', async () => {
    const refused = await call(platform, await startAtLab(wsA), { cookie: `codeagent_session=${stranger.token}`, headers: page });
    expect(refused.status).toBe(404);
    expect(refused.location).toBeUndefined();

    const { pass: viewerPass } = await enter(wsA, viewer.token);
    expect((await call(hostOf(wsA), `/jupyter/${wsA}/api/contents`, { cookie: `__Host-codeagent_lab=${viewerPass}` })).status).toBe(200);
    const write = await call(hostOf(wsA), `/jupyter/${wsA}/api/contents/a.ipynb`, {
      method: 'PUT',
      cookie: `__Host-codeagent_lab=${viewerPass}`,
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
    expect((await call(hostOf(wsA), `/jupyter/${wsA}/api/contents`, { cookie: `__Host-codeagent_lab=${pass}` })).status).toBe(200);
    expect((await call(platform, '/api/v1/auth/logout', { method: 'POST', headers: bearer(session) })).status).toBe(204);
    expect((await call(hostOf(wsA), `/jupyter/${wsA}/api/contents`, { cookie: `__Host-codeagent_lab=${pass}` })).status).toBe(401);
    // A page with a pass that no longer holds starts the way in again.
    const again = await call(hostOf(wsA), `/jupyter/${wsA}/lab`, { cookie: `__Host-codeagent_lab=${pass}`, headers: page });
    expect(again.status).toBe(302);
    expect(again.location).toContain(`http://${platform}/jupyter/${wsA}/codeagent-lab-ticket?lab_state=`);
  });
});

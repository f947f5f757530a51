import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import {
  LAB_COOKIE_NAMES,
  LAB_PASS_COOKIE,
  LAB_PASS_PREFIX,
  LAB_STATE_COOKIE,
  SESSION_COOKIE,
  isLabStateHash,
  labStateHash,
  newLabState,
  readCookie,
  refusedCrossSite,
  withoutCookie,
} from '@codeagent/auth';
import { labOriginOf, labWorkspaceOfHost, underLabsDomain, type LabOrigins } from '@codeagent/config';

import { isPageRequest, labWorkspaceOf, loginRedirect, type SessionChecker } from './jupyter-auth.js';
import { MESSAGES } from './routes.js';

/**
 * Each workspace's JupyterLab on a host of its own (LAB_ORIGIN, decision 0263), at the gateway.
 *
 * A lab's host (`<id>.<suffix>`) serves that workspace's `/jupyter/<id>/` and nothing else, with a
 * cookie of its own, the lab's pass; the platform's session cookie is no credential there. A
 * browser without a pass goes through the platform's origin once: the lab's host keeps a random
 * state in a cookie and sends the browser, with the state's hash signed by the gateway, to
 * `/jupyter/<id>/codeagent-lab-ticket` at the platform's origin, which checks the signature, asks
 * the backend for a ticket of the session (a minute, for that hash) and answers a page whose form
 * posts it to `/jupyter/<id>/codeagent-lab-login` at the lab's host (never in an address), where
 * the backend exchanges the ticket and the state for the pass, once. At the platform's origin, a
 * workspace's lab answers API clients with a token in `Authorization` only; a page is sent to the
 * lab's host, anything else the cookie carries is 404 (a page of the lab in the platform's origin
 * would run its outputs' scripts with the member's session).
 */

/** At the platform's origin: where a lab's host sends a browser for its ticket. */
export const LAB_TICKET_PATH = 'codeagent-lab-ticket';
/** At a lab's host: where the ticket is exchanged for the pass. */
export const LAB_LOGIN_PATH = 'codeagent-lab-login';
/** How long a browser may take from the lab's host, through a login at the platform, back again. */
const STATE_SECONDS = 600;
/** The longest `next` a lab's login keeps (longer: the lab's start page): it travels through three addresses. */
const NEXT_MAX = 2048;

const labRoot = (ws: string) => `/jupyter/${ws}/`;

/** The query parameter `name` of a URL, or undefined. */
function queryParam(url: string, name: string): string | undefined {
  const q = url.indexOf('?');
  if (q < 0) return undefined;
  return new URLSearchParams(url.slice(q + 1)).get(name) ?? undefined;
}

/** Where to go once in: a path of this lab, or its start page (never another host or lab). */
export function labNext(ws: string, next: string | undefined): string {
  const root = labRoot(ws);
  if (next === undefined || next.length > NEXT_MAX || !next.startsWith(root) || /[\\\s]|\/\//.test(next)) return `${root}lab`;
  return next;
}

/**
 * The key a lab's host signs its states' hashes with, and the platform's origin checks them with
 * (every gateway instance derives the same from JUPYTERLAB_TOKEN, which only gateways hold; a
 * random one for a gateway without it). A ticket is made only for a state a lab's host made: a
 * script of a lab's page that sent a member's browser for a ticket of a state of its own, and read
 * the ticket from any answer left at the lab's origin (a hostile review did, from the 431 a long
 * address got), could otherwise exchange it anywhere. Now the state it would need is the member's,
 * in an HttpOnly cookie.
 */
export function labStateKey(jupyterToken: string): Buffer {
  return jupyterToken === '' ? randomBytes(32) : createHmac('sha256', jupyterToken).update('codeagent lab state').digest();
}

/** `<hash>.<until>.<signature>`: a state's hash, signed for one workspace until a time. */
export function signLabState(key: Buffer, ws: string, stateHash: string, now = Date.now()): string {
  const until = Math.floor(now / 1000) + STATE_SECONDS;
  const signature = createHmac('sha256', key).update(`${ws}.${stateHash}.${until}`).digest('base64url');
  return `${stateHash}.${until}.${signature}`;
}

/** The state's hash of a signed one for `ws`, or undefined when it was not made by a lab's host (or has expired). */
export function openLabState(key: Buffer, ws: string, signed: string, now = Date.now()): string | undefined {
  const [hash, until, signature, ...rest] = signed.split('.');
  if (hash === undefined || until === undefined || signature === undefined || rest.length > 0 || !isLabStateHash(hash) || !/^[0-9]{1,12}$/.test(until))
    return undefined;
  const expected = createHmac('sha256', key).update(`${ws}.${hash}.${until}`).digest();
  const given = Buffer.from(signature, 'base64url');
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return undefined;
  return Number(until) * 1000 > now ? hash : undefined;
}

/**
 * A cookie of the lab's host: for all of it (the `__Host-` prefix wants `/` and `Secure`), never
 * to scripts. The state is `SameSite=None`: it must come with the login's POST from the platform's
 * origin, another site.
 */
function cookie(name: string, value: string, maxAge: number, sameSite: 'Lax' | 'None'): string {
  return `${name}=${value}; Path=/; Max-Age=${maxAge}; HttpOnly; Secure; SameSite=${sameSite}`;
}

/**
 * What the gateway itself answers at a lab's host: a document of no origin that no page frames,
 * sends no Referer, and is kept nowhere. The lab's pages run their outputs' scripts in the same
 * origin, and one that opened the login address (which holds a ticket) in a window or frame could
 * otherwise read that address from an answer that stayed (a refusal).
 */
const ownAnswer = (reply: FastifyReply): FastifyReply =>
  reply
    .header('content-security-policy', "default-src 'none'; sandbox; frame-ancestors 'none'")
    .header('referrer-policy', 'no-referrer')
    .header('cache-control', 'no-store');

const notFound = (reply: FastifyReply, message: string) => reply.code(404).header('cache-control', 'no-store').send({ error: 'not_found', message });

/**
 * Sends a browser without a (valid) pass from a lab's host to the platform's origin for a ticket,
 * with a new state kept here.
 */
export function startLabLogin(reply: FastifyReply, labs: LabOrigins, key: Buffer, ws: string, url: string): FastifyReply {
  const state = newLabState();
  const next = url.length > NEXT_MAX ? `${labRoot(ws)}lab` : url;
  const target = `${labs.platform}${labRoot(ws)}${LAB_TICKET_PATH}?lab_state=${signLabState(key, ws, labStateHash(state))}&next=${encodeURIComponent(next)}`;
  return ownAnswer(reply)
    .code(302)
    .header('set-cookie', cookie(LAB_STATE_COOKIE, state, STATE_SECONDS, 'None'))
    .redirect(target);
}

/** The workspace whose lab's host a request addressed, or undefined. */
export function labHostWorkspace(labs: LabOrigins | undefined, host: string | undefined): string | undefined {
  return labs === undefined ? undefined : labWorkspaceOfHost(labs, host);
}

/** The path of a request after the lab's root: `codeagent-lab-login` of `/jupyter/<id>/codeagent-lab-login?…`. */
const restOf = (url: string, ws: string) => url.split('?', 1)[0]!.slice(labRoot(ws).length);

/**
 * The rules of lab hosts and of the labs at the platform's origin, before any route (and before
 * the upgrade of a websocket, which passes through the same hooks).
 */
export function registerLabHosts(app: FastifyInstance, labs: LabOrigins, sessions: SessionChecker, key: Buffer): void {
  app.addHook('onRequest', async (req: FastifyRequest, reply: FastifyReply) => {
    // (Before the bridge's rewrite: `/jupyter/<id>/codeagent-bridge/…`.)
    const url = req.originalUrl;
    const pathWs = labWorkspaceOf(url);
    const hostWs = labHostWorkspace(labs, req.host);
    if (hostWs !== undefined) return labHost(req, reply, hostWs, pathWs, url);
    if (underLabsDomain(labs, req.host)) return notFound(ownAnswer(reply), 'no workspace has its JupyterLab at this host');
    if (pathWs === undefined) return;
    // The platform's origin. API clients with a token in Authorization are served here as before.
    if (req.headers.authorization !== undefined) return;
    if (restOf(url, pathWs) === LAB_TICKET_PATH) return ticket(req, reply, pathWs, url);
    if (isPageRequest(req.method, req.headers)) {
      return reply
        .code(302)
        .header('cache-control', 'no-store')
        .redirect(`${labOriginOf(labs, pathWs)}${url}`);
    }
    return notFound(
      reply,
      `this workspace's JupyterLab is served at ${labOriginOf(labs, pathWs)}${labRoot(pathWs)} (LAB_ORIGIN); here only with a token in Authorization`,
    );
  });

  /** A lab's host: its own lab's paths only, its pass as the credential. */
  const labHost = async (req: FastifyRequest, reply: FastifyReply, hostWs: string, pathWs: string | undefined, url: string) => {
    if (url === '/' || url.startsWith('/?'))
      return ownAnswer(reply)
        .code(302)
        .redirect(`${labRoot(hostWs)}lab`);
    if (pathWs !== hostWs) return notFound(ownAnswer(reply), `this host serves the JupyterLab of one workspace only: ${labRoot(hostWs)}`);
    const headers = req.headers;
    const pass = readCookie(headers.cookie, LAB_PASS_COOKIE);
    const state = readCookie(headers.cookie, LAB_STATE_COOKIE);
    // The lab's cookies go no further than here (the pass, as Bearer, to the backend and the bridge
    // only), and the platform's session cookie is no credential here: it never comes from the
    // platform (it is host-only), so it was set by a page of a sibling host for the parent domain
    // (a hostile review: a member then worked in every lab they opened as the attacker).
    const rest = [...LAB_COOKIE_NAMES, SESSION_COOKIE].reduce<string | undefined>((left, name) => withoutCookie(left, name), headers.cookie);
    if (rest === undefined) delete headers.cookie;
    else headers.cookie = rest;
    if (restOf(url, hostWs) === LAB_LOGIN_PATH) return login(req, ownAnswer(reply), hostWs, state);
    // (Only a pass: a session's token there would be a credential a sibling's page could plant over http.)
    if (pass.startsWith(LAB_PASS_PREFIX) && headers.authorization === undefined) {
      // The cookie's rule (decision 0120): another host (another workspace's lab is same-site) may not write with it.
      if (refusedCrossSite('cookie', req.method, headers, req.host)) {
        return ownAnswer(reply).code(403).send({ error: 'forbidden', message: MESSAGES.jupyterCrossSite });
      }
      headers.authorization = `Bearer ${pass}`;
    }
  };

  /** At the platform's origin: a ticket of the session for the browser's state, and back to the lab's host. */
  const ticket = async (req: FastifyRequest, reply: FastifyReply, ws: string, url: string) => {
    if (req.method !== 'GET') return reply.code(405).header('allow', 'GET').send({ error: 'method_not_allowed', message: 'open this address in a browser' });
    const stateHash = openLabState(key, ws, queryParam(url, 'lab_state') ?? '');
    if (stateHash === undefined) {
      return reply.code(400).send({
        error: 'invalid_request',
        message: `this link has expired or was not made by the lab; open the lab from its own address: ${labOriginOf(labs, ws)}${labRoot(ws)}lab`,
      });
    }
    const next = labNext(ws, queryParam(url, 'next'));
    const token = readCookie(req.headers.cookie, SESSION_COOKIE);
    if (token === '') return reply.code(302).header('cache-control', 'no-store').redirect(loginRedirect(url));
    const answer = await sessions.check(token, req.id, { workspaceId: ws, access: 'read' }, { stateHash });
    switch (answer.kind) {
      case 'user':
        if (answer.labTicket === undefined) return reply.code(502).send({ error: 'bad_gateway', message: MESSAGES.sessionUnavailable });
        return postToLab(reply, labOriginOf(labs, ws), `${labRoot(ws)}${LAB_LOGIN_PATH}`, answer.labTicket, next);
      case 'invalid':
        return reply.code(302).header('cache-control', 'no-store').redirect(loginRedirect(url));
      case 'refused':
        return answer.status === 404 ? notFound(reply, MESSAGES.jupyterNotMember) : reply.code(403).send({ error: 'forbidden', message: answer.message });
      default:
        return unavailable(reply, answer.timedOut);
    }
  };

  /** At a lab's host: the ticket (posted from the platform's origin) and this browser's state for the pass, kept as the lab's cookie. */
  const login = async (req: FastifyRequest, reply: FastifyReply, ws: string, state: string) => {
    // POST only: a ticket is never in an address, where an answer left at the lab's origin (a
    // proxy's own error page) would show it to a script of the lab's page (decision 0263).
    if (req.method !== 'POST') return reply.code(405).header('allow', 'POST').send({ error: 'method_not_allowed', message: 'open the lab from the platform' });
    // Posted by the platform's page only: a lab page's own script (its origin is the lab's) could
    // otherwise plant a state of its author's and post the author's ticket, and the member would
    // work on as the author (the fourth review did).
    if (req.headers.origin !== labs.platform) {
      return reply.code(403).send({
        error: 'forbidden',
        message: `the lab's login is posted by the platform's page; open the lab from the platform: ${labs.platform}${labRoot(ws)}lab`,
      });
    }
    const form = await formBody(req);
    // (Cut off or gone: an answer was written already, or nobody is left to read one.)
    if (form === 'gone') return reply.raw.headersSent || req.raw.destroyed ? reply.hijack() : reply.code(408).send({ error: 'request_timeout' });
    if (form === undefined) return reply.code(400).send({ error: 'invalid_request', message: 'a form of at most 16 KiB (ticket, next)' });
    const ticketToken = form.get('ticket') ?? '';
    const again = `open the lab again from the platform: ${labs.platform}${labRoot(ws)}lab`;
    if (ticketToken === '' || state === '') {
      return reply.code(401).send({ error: 'unauthorized', message: `this link to the lab was made for another browser or has been used; ${again}` });
    }
    const answer = await sessions.check(ticketToken, req.id, { workspaceId: ws, access: 'read' }, { state });
    if (answer.kind === 'user' && answer.labPass !== undefined) {
      return reply
        .code(303)
        .header('set-cookie', [cookie(LAB_PASS_COOKIE, answer.labPass.pass, answer.labPass.expiresIn, 'Lax'), cookie(LAB_STATE_COOKIE, '', 0, 'None')])
        .redirect(labNext(ws, form.get('next') ?? undefined), 303);
    }
    if (answer.kind === 'unavailable') return unavailable(reply, answer.timedOut);
    if (answer.kind === 'refused') {
      return answer.status === 404 ? notFound(reply, MESSAGES.jupyterNotMember) : reply.code(403).send({ error: 'forbidden', message: answer.message });
    }
    // (The backend says which: expired, made for another browser, used.)
    const why =
      answer.kind === 'invalid'
        ? answer.message.replace(/; open the lab again from the platform$/, '')
        : 'this link to the lab has expired or was made for another browser';
    return reply.code(401).send({ error: 'unauthorized', message: `${why}; ${again}` });
  };
}

/** The largest login form: a ticket (≈ 400 bytes) and `next` (2 KiB). */
const FORM_MAX = 16 * 1024;

/** How long the login's form may take to arrive. */
const FORM_SECONDS = 10;

/**
 * A request's `application/x-www-form-urlencoded` body, read whole here (at most `FORM_MAX`, within
 * `FORM_SECONDS`), or undefined when it is none of that; `gone` when the request went away (or was
 * cut off and answered) while it arrived.
 */
async function formBody(req: FastifyRequest): Promise<URLSearchParams | undefined | 'gone'> {
  if (!String(req.headers['content-type'] ?? '').startsWith('application/x-www-form-urlencoded')) return undefined;
  if (Number(req.headers['content-length'] ?? 0) > FORM_MAX) return undefined;
  const raw = req.raw;
  const timer = setTimeout(() => raw.destroy(new Error(`the form did not arrive within ${FORM_SECONDS} s`)), FORM_SECONDS * 1000);
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of raw as AsyncIterable<Buffer>) {
      size += chunk.length;
      if (size > FORM_MAX) return undefined;
      chunks.push(chunk);
    }
  } catch {
    return 'gone';
  } finally {
    clearTimeout(timer);
  }
  return new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
}

/** The one script of the form page below: it sends the form (the page's CSP allows it by its hash). */
const SUBMIT_SCRIPT = 'document.forms[0].submit();';
const SUBMIT_HASH = `'sha256-${createHash('sha256').update(SUBMIT_SCRIPT).digest('base64')}'`;
const escapeHtml = (v: string) => v.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

/**
 * At the platform's origin: a page that posts the ticket to the lab's login (OAuth's `form_post`).
 * The ticket is in no address: not in a Location, a history entry, a log or an error page a proxy
 * answers at the lab's origin instead (the third review read it from nginx's 400 for a head that
 * a lab page's cookies had made too large). It runs its one script, posts only to the lab, and is
 * framed nowhere; without script its button sends the same form.
 */
function postToLab(reply: FastifyReply, labOrigin: string, loginPath: string, ticket: string, next: string): FastifyReply {
  const html =
    '<!doctype html><html><head><meta charset="utf-8"><title>Opening JupyterLab…</title></head><body>' +
    `<form method="post" action="${escapeHtml(labOrigin + loginPath)}">` +
    `<input type="hidden" name="ticket" value="${escapeHtml(ticket)}"><input type="hidden" name="next" value="${escapeHtml(next)}">` +
    '<noscript><button type="submit">Open JupyterLab</button></noscript></form>' +
    `<script>${SUBMIT_SCRIPT}</script></body></html>`;
  return (
    reply
      .code(200)
      .header('content-type', 'text/html; charset=utf-8')
      .header('cache-control', 'no-store')
      // (The platform's origin only, never its address: with `no-referrer` the post's `Origin` would be `null`, which the login refuses.)
      .header('referrer-policy', 'strict-origin')
      .header('content-security-policy', `default-src 'none'; script-src ${SUBMIT_HASH}; form-action ${labOrigin}; frame-ancestors 'none'; base-uri 'none'`)
      .send(html)
  );
}

function unavailable(reply: FastifyReply, timedOut: boolean): FastifyReply {
  return timedOut
    ? reply.code(504).send({ error: 'gateway_timeout', message: MESSAGES.sessionTimeout })
    : reply.code(502).send({ error: 'bad_gateway', message: MESSAGES.sessionUnavailable });
}

// The backend behind the real gateway (issue 12 items 5 and 8, issue 13 item 5): uploads with
// Expect: 100-continue, 413 instead of 502, the Secure cookie behind a TLS proxy, and the
// session check at /jupyter that the gateway makes through GET /api/v1/auth/session.
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { createWriteStream, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer, request, type IncomingHttpHeaders, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { finished } from 'node:stream/promises';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { buildGatewayApp } from '@codeagent/gateway';
import { listenOn, upgrade } from '@codeagent/gateway/upstream-testing';
import { LocalObjectStore } from '@codeagent/storage';
import { ADMIN_EMAIL, ADMIN_PASSWORD, bearer, createAndLogin, startTestBackend, type TestBackend } from './testing.js';

const run = promisify(execFile);
const CURL = '/usr/bin/curl';
const MiB = 1024 * 1024;
const MAX_UPLOAD = 128 * MiB;
const JUPYTER_TOKEN = 'jupyter-token-only-the-gateway-knows';

describe(`the backend through the gateway (${process.env.CODEAGENT_TEST_DB ?? 'postgres'})`, () => {
  let b: TestBackend;
  let dir: string;
  let backendUrl: string;
  let gateway: FastifyInstance;
  let behindTls: FastifyInstance;
  let base: string;
  let tlsBase: string;
  let jupyter: Server;
  const jupyterSeen: { url: string; headers: IncomingHttpHeaders }[] = [];
  let ws: string;

  beforeAll(async () => {
    if (!existsSync(CURL)) throw new Error('curl is missing: install Debian curl (apt-get install curl)');
    dir = mkdtempSync(join(tmpdir(), 'codeagent-gateway-e2e-'));
    b = await startTestBackend({ maxUploadBytes: MAX_UPLOAD, store: new LocalObjectStore(join(dir, 'storage')) });
    backendUrl = await b.app.listen({ host: '127.0.0.1', port: 0 });
    jupyter = createServer((req, res) => {
      jupyterSeen.push({ url: req.url ?? '', headers: req.headers });
      req.resume();
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"jupyter":true}');
    });
    jupyter.on('upgrade', (req, socket) => {
      jupyterSeen.push({ url: `UPGRADE ${req.url}`, headers: req.headers });
      socket.destroy();
    });
    const jupyterUrl = await listenOn(jupyter);
    const upstreams = { backend: backendUrl, clusterAdmin: 'http://127.0.0.1:9', bridge: 'http://127.0.0.1:9' };
    gateway = await buildGatewayApp({ upstreams, jupyter: { url: jupyterUrl, token: JUPYTER_TOKEN }, maxUploadBytes: MAX_UPLOAD });
    base = await gateway.listen({ host: '127.0.0.1', port: 0 });
    // As deployed behind a TLS-terminating proxy on this machine.
    behindTls = await buildGatewayApp({ upstreams, trustedProxies: ['127.0.0.1'], maxUploadBytes: MAX_UPLOAD });
    tlsBase = await behindTls.listen({ host: '127.0.0.1', port: 0 });
    const created = await b.app.inject({ method: 'POST', url: '/api/v1/platform/workspaces', headers: bearer(b.adminToken), payload: { name: 'gateway-e2e' } });
    ws = created.json<{ id: string }>().id;
  });
  afterAll(async () => {
    await gateway.close();
    await behindTls.close();
    jupyter.closeAllConnections();
    await new Promise((r) => jupyter.close(r));
    await b.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const login = async (at: string, email: string, password: string, headers: Record<string, string> = {}) =>
    fetch(`${at}/api/v1/auth/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify({ email, password }),
    });
  const sessionCookie = (res: Response) => /codeagent_session=[^;]+/.exec(res.headers.get('set-cookie') ?? '')![0];

  describe('uploads and body limits', () => {
    it('curl -T of a 100 MB file succeeds (curl sends Expect: 100-continue) and stores every byte', async () => {
      const file = join(dir, 'big.bin');
      const hash = createHash('sha256');
      const out = createWriteStream(file);
      const block = Buffer.alloc(MiB);
      for (let i = 0; i < 100; i++) {
        block.fill(i);
        block.writeUInt32BE(i * 7919, 0);
        hash.update(block);
        if (!out.write(block)) await new Promise<void>((r) => out.once('drain', () => r()));
      }
      out.end();
      await finished(out);
      const sha256 = hash.digest('hex');
      const { stdout, stderr } = await run(CURL, [
        '-sS',
        '-v',
        '-T',
        file,
        '-H',
        `authorization: Bearer ${b.adminToken}`,
        '-w',
        '\n%{http_code}',
        `${base}/api/v1/data-resources/${ws}/objects/big.bin`,
      ]);
      expect(stderr).toMatch(/> Expect: 100-continue/i);
      const [body, status] = stdout.split('\n');
      expect(status).toBe('201');
      expect(JSON.parse(body!)).toMatchObject({ path: 'big.bin', size: 100 * MiB, sha256 });
      // And it reads back whole through the gateway.
      const back = await fetch(`${base}/api/v1/data-resources/${ws}/objects/big.bin`, { headers: bearer(b.adminToken) });
      const readHash = createHash('sha256');
      for await (const chunk of back.body as unknown as AsyncIterable<Uint8Array>) readHash.update(chunk);
      expect(readHash.digest('hex')).toBe(sha256);
    });

    it('a 2 MB login body gets 413 payload_too_large naming the limit, with curl and with Node (was 502)', async () => {
      const file = join(dir, 'login.json');
      const payload = JSON.stringify({ email: ADMIN_EMAIL, password: 'p'.repeat(2_000_000) });
      const out = createWriteStream(file);
      out.end(payload);
      await finished(out);
      for (let i = 0; i < 3; i++) {
        const { stdout } = await run(CURL, [
          '-sS',
          '-X',
          'POST',
          '-H',
          'content-type: application/json',
          '--data-binary',
          `@${file}`,
          '-w',
          '\n%{http_code}',
          `${base}/api/v1/auth/login`,
        ]);
        const [body, status] = stdout.split('\n');
        expect(status).toBe('413');
        expect(JSON.parse(body!)).toEqual({ error: 'payload_too_large', message: 'request body is larger than the 16384 bytes this route accepts' });
        const res = await fetch(`${base}/api/v1/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: payload });
        expect(res.status).toBe(413);
        expect(await res.json()).toMatchObject({ error: 'payload_too_large', message: expect.stringContaining('16384') as unknown });
      }
      // Nobody was logged in by it, and the platform still answers.
      expect((await fetch(`${base}/api/v1/health`)).status).toBe(200);
    });

    it('a declared upload over MAX_UPLOAD_BYTES gets 413 before the client sends it; nothing is stored', async () => {
      const status = await new Promise<{ status: number; continued: boolean; body: string }>((resolve, reject) => {
        let continued = false;
        const url = new URL(`${base}/api/v1/data-resources/${ws}/objects/huge.bin`);
        const req = request(
          {
            host: url.hostname,
            port: url.port,
            path: url.pathname,
            method: 'PUT',
            agent: false,
            headers: { ...bearer(b.adminToken), 'content-length': String(MAX_UPLOAD + 65 * 1024 + 1), expect: '100-continue' },
          },
          (res) => {
            let text = '';
            res.on('data', (c: Buffer) => (text += c.toString()));
            res.on('end', () => resolve({ status: res.statusCode ?? 0, continued, body: text }));
          },
        );
        req.on('continue', () => (continued = true));
        req.on('error', reject);
      });
      expect(status.status).toBe(413);
      expect(status.continued).toBe(false);
      expect(JSON.parse(status.body)).toMatchObject({
        error: 'payload_too_large',
        message: expect.stringContaining(`MAX_UPLOAD_BYTES (${MAX_UPLOAD} bytes)`) as unknown,
      });
      const listed = await fetch(`${base}/api/v1/data-resources/${ws}/objects?prefix=huge`, { headers: bearer(b.adminToken) });
      expect(((await listed.json()) as { items: unknown[] }).items).toEqual([]);
    });
  });

  describe('the Secure cookie follows the original scheme (TRUSTED_PROXIES)', () => {
    it('is Secure when a trusted proxy in front reports https, and cleared as Secure at logout', async () => {
      const res = await login(tlsBase, ADMIN_EMAIL, ADMIN_PASSWORD, { 'x-forwarded-proto': 'https', 'x-forwarded-host': 'platform.example' });
      expect(res.status).toBe(200);
      expect(res.headers.get('set-cookie')).toMatch(/; Secure/);
      const cookie = sessionCookie(res);
      const out = await fetch(`${tlsBase}/api/v1/auth/logout`, {
        method: 'POST',
        headers: { cookie, origin: 'https://platform.example', 'x-forwarded-proto': 'https', 'x-forwarded-host': 'platform.example' },
      });
      expect(out.status).toBe(204);
      expect(out.headers.get('set-cookie')).toMatch(/codeagent_session=;.*Secure/);
    });

    it('is not Secure over plain http, and a client cannot make the gateway claim https', async () => {
      const plain = await login(base, ADMIN_EMAIL, ADMIN_PASSWORD);
      expect(plain.headers.get('set-cookie')).not.toMatch(/Secure/);
      const spoofed = await login(base, ADMIN_EMAIL, ADMIN_PASSWORD, { 'x-forwarded-proto': 'https' });
      expect(spoofed.headers.get('set-cookie')).not.toMatch(/Secure/);
    });
  });

  describe('GET /api/v1/auth/session (what the gateway asks for /jupyter)', () => {
    it('answers the user id and is_system_admin, never cached; 401 without a valid session', async () => {
      const member = await createAndLogin(b, 'session-member@example.com');
      const admin = await b.app.inject({ method: 'GET', url: '/api/v1/auth/session', headers: bearer(b.adminToken) });
      expect(admin.statusCode).toBe(200);
      expect(admin.json()).toEqual({ user_id: b.adminId, is_system_admin: true });
      expect(admin.headers['cache-control']).toBe('no-store');
      const plain = await b.app.inject({ method: 'GET', url: '/api/v1/auth/session', headers: { cookie: `codeagent_session=${member.token}` } });
      expect(plain.json()).toEqual({ user_id: member.id, is_system_admin: false });
      expect((await b.app.inject({ method: 'GET', url: '/api/v1/auth/session' })).statusCode).toBe(401);
      expect((await b.app.inject({ method: 'GET', url: '/api/v1/auth/session', headers: bearer('not-a-token') })).json()).toMatchObject({
        error: 'unauthorized',
      });
      const doc = (await b.app.inject({ method: 'GET', url: '/api/v1/openapi.json' })).json<{ paths: Record<string, unknown> }>();
      expect(doc.paths).toHaveProperty('/api/v1/auth/session');
    });

    it("for nginx's auth_request: the user id in a header, and 403 for a non-administrator when the ingress requires one", async () => {
      const member = await createAndLogin(b, 'session-require@example.com');
      const require = { 'x-codeagent-require': 'system_admin' };
      const admin = await b.app.inject({ method: 'GET', url: '/api/v1/auth/session', headers: { ...bearer(b.adminToken), ...require } });
      expect(admin.statusCode).toBe(200);
      expect(admin.headers['x-codeagent-user-id']).toBe(b.adminId);
      const plain = await b.app.inject({ method: 'GET', url: '/api/v1/auth/session', headers: { ...bearer(member.token), ...require } });
      expect(plain.statusCode).toBe(403);
      expect(plain.json()).toMatchObject({ error: 'forbidden', message: expect.stringMatching(/system administrators only/) as unknown });
      // Without the requirement the same user is simply described; with a bad token it stays 401.
      expect((await b.app.inject({ method: 'GET', url: '/api/v1/auth/session', headers: bearer(member.token) })).statusCode).toBe(200);
      expect((await b.app.inject({ method: 'GET', url: '/api/v1/auth/session', headers: { ...bearer('not-a-token'), ...require } })).statusCode).toBe(401);
    });
  });

  describe('/jupyter: system administrators only, the session checked on every request', () => {
    it('a logout stops the same cookie at /jupyter at once, over HTTP and websockets', async () => {
      const res = await login(base, ADMIN_EMAIL, ADMIN_PASSWORD);
      const cookie = sessionCookie(res);
      const origin = `http://${new URL(base).host}`;
      const before = jupyterSeen.length;
      expect((await fetch(`${base}/jupyter/api/status`, { headers: { cookie } })).status).toBe(200);
      expect(jupyterSeen.at(-1)!.headers.authorization).toBe(`token ${JUPYTER_TOKEN}`);
      expect((await fetch(`${base}/api/v1/auth/logout`, { method: 'POST', headers: { cookie, origin } })).status).toBe(204);
      const after = await fetch(`${base}/jupyter/api/status`, { headers: { cookie } });
      expect(after.status).toBe(401);
      expect(await after.json()).toMatchObject({ error: 'unauthorized' });
      expect(await upgrade(base, '/jupyter/api/kernels/k/channels', { cookie, origin })).toBe(401);
      expect(jupyterSeen.length).toBe(before + 1);
    });

    it('a logged-in member who is not a system administrator gets 403, over HTTP and websockets', async () => {
      const member = await createAndLogin(b, 'jupyter-member@example.com');
      await b.app.inject({
        method: 'POST',
        url: `/api/v1/platform/workspaces/${ws}/members`,
        headers: bearer(b.adminToken),
        payload: { user_id: member.id, role: 'admin' },
      });
      const before = jupyterSeen.length;
      const origin = `http://${new URL(base).host}`;
      const res = await fetch(`${base}/jupyter/lab`, { headers: { cookie: `codeagent_session=${member.token}` } });
      expect(res.status).toBe(403);
      expect(await res.json()).toMatchObject({ error: 'forbidden' });
      expect((await fetch(`${base}/jupyter/api/terminals`, { method: 'POST', headers: bearer(member.token) })).status).toBe(403);
      expect(await upgrade(base, '/jupyter/terminals/websocket/1', { cookie: `codeagent_session=${member.token}`, origin })).toBe(403);
      expect(jupyterSeen.length).toBe(before);
    });
  });
});

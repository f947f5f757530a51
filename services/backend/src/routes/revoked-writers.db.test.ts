import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import { addMembers, bearer, createAndLogin, createWorkspace, startTestBackend, type TestBackend } from '../testing.js';

/**
 * Decision 0261: a write whose body arrives slowly asks again, in its transaction, whether its
 * writer may still write. Before, the route's check before the body was the only one: a member
 * removed or a user disabled while the upload ran still had it stored (hostile review: stored
 * 129 s after the removal, as the removed user).
 */
describe(`uploads of writers whose access ended meanwhile (${process.env.CODEAGENT_TEST_DB ?? 'postgres'})`, () => {
  let b: TestBackend;
  let base: string;
  let ws: string;
  beforeAll(async () => {
    b = await startTestBackend();
    base = (await b.app.listen({ host: '127.0.0.1', port: 0 })).replace(/\/$/, '');
    ws = await createWorkspace(b, 'revoked-writers');
  }, 60_000);
  afterAll(async () => {
    await b.close();
  });

  const admin = (method: string, url: string, payload?: object) =>
    b.app.inject({ method: method as 'GET', url: `/api/v1/platform${url}`, headers: bearer(b.adminToken), ...(payload ? { payload } : {}) });

  /** Sends all but the last 40 bytes of a body; `finish` sends them and resolves with the answer. */
  function started(path: string, token: string, body: Buffer, headers: Record<string, string> = {}) {
    const url = new URL(`${base}${path}`);
    const req = request({
      host: url.hostname,
      port: url.port,
      path: url.pathname,
      method: headers['content-type']?.startsWith('multipart/') ? 'POST' : 'PUT',
      headers: { ...bearer(token), 'content-length': body.length, ...headers },
    });
    const answer = new Promise<{ status: number; body: string }>((resolve, reject) => {
      req.on('response', (res) => {
        let text = '';
        res.on('data', (c: Buffer) => (text += c.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
      });
      req.on('error', reject);
    });
    req.write(body.subarray(0, body.length - 40));
    return {
      finish: async () => {
        // (The part sent so far has reached the backend: the access was checked before it.)
        await new Promise((r) => setTimeout(r, 300));
        req.end(body.subarray(body.length - 40));
        return answer;
      },
    };
  }
  const stored = async (path: string) =>
    (await b.app.inject({ method: 'GET', url: `/api/v1/data-resources/${ws}/objects/${path}`, headers: bearer(b.adminToken) })).statusCode;

  it("a removed member's or a disabled user's upload in flight is refused and stores nothing; a member who keeps access stores hers", async () => {
    const [removed, disabled, formed, keeper] = await Promise.all(
      ['removed', 'disabled', 'formed', 'keeper'].map((name) => createAndLogin(b, `${name}-writer@example.com`)),
    );
    await addMembers(b, ws, [
      [removed!, 'editor'],
      [disabled!, 'editor'],
      [formed!, 'editor'],
      [keeper!, 'editor'],
    ]);
    const content = Buffer.alloc(200 * 1024, 7);
    const boundary = 'x-boundary-0261';
    const form = Buffer.concat([
      Buffer.from(`--${boundary}\r\ncontent-disposition: form-data; name="path"\r\n\r\nform.bin\r\n`),
      Buffer.from(`--${boundary}\r\ncontent-disposition: form-data; name="file"; filename="form.bin"\r\ncontent-type: application/octet-stream\r\n\r\n`),
      content,
      Buffer.from(`\r\n--${boundary}--\r\n`),
    ]);
    const uploads = {
      removed: started(`/api/v1/data-resources/${ws}/objects/removed.bin`, removed!.token, content),
      disabled: started(`/api/v1/dav/${ws}/disabled.bin`, disabled!.token, content),
      formed: started(`/api/v1/data-resources/${ws}/uploads`, formed!.token, form, { 'content-type': `multipart/form-data; boundary=${boundary}` }),
      keeper: started(`/api/v1/data-resources/${ws}/objects/keeper.bin`, keeper!.token, content),
    };
    await new Promise((r) => setTimeout(r, 300));
    expect((await admin('DELETE', `/workspaces/${ws}/members/${removed!.id}`)).statusCode).toBe(204);
    expect((await admin('PATCH', `/users/${disabled!.id}`, { disabled: true })).statusCode).toBe(200);
    expect((await admin('DELETE', `/workspaces/${ws}/members/${formed!.id}`)).statusCode).toBe(204);

    const [r, d, f, k] = await Promise.all([uploads.removed.finish(), uploads.disabled.finish(), uploads.formed.finish(), uploads.keeper.finish()]);
    expect(r.status, r.body).toBe(404);
    expect(d.status, d.body).toBe(401);
    expect(f.status, f.body).toBe(404);
    expect(k.status, k.body).toBe(201);
    expect(await stored('removed.bin')).toBe(404);
    expect(await stored('disabled.bin')).toBe(404);
    expect(await stored('form.bin')).toBe(404);
    expect(await stored('keeper.bin')).toBe(200);
  });

  it("a removed member's folder move stops at the next file: 404, the rest stays where it was", async () => {
    const mover = await createAndLogin(b, 'mover-writer@example.com');
    await addMembers(b, ws, [[mover, 'editor']]);
    const names = Array.from({ length: 20 }, (_, i) => `f${String(i).padStart(2, '0')}.txt`);
    for (const name of names) {
      expect(
        (await b.app.inject({ method: 'PUT', url: `/api/v1/data-resources/${ws}/objects/src/${name}`, headers: bearer(mover.token), payload: name }))
          .statusCode,
      ).toBe(201);
    }
    const db = b.t.database.db;
    let move: Promise<Response> | undefined;
    // The move waits at the 10th file (its row held here) while the member is removed.
    await db.transaction().execute(async (trx) => {
      await trx.selectFrom('objects').select('path').where('workspace_id', '=', ws).where('path', '=', `src/${names[9]}`).forUpdate().execute();
      move = fetch(`${base}/api/v1/dav/${ws}/src`, { method: 'MOVE', headers: { ...bearer(mover.token), destination: `/api/v1/dav/${ws}/dst` } });
      for (let i = 0; ; i++) {
        const { rows } = await sql<{
          n: number;
        }>`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`.execute(db);
        if (rows[0]!.n > 0) break;
        if (i > 500) throw new Error('the move never waited');
        await new Promise((r) => setTimeout(r, 20));
      }
      expect((await admin('DELETE', `/workspaces/${ws}/members/${mover.id}`)).statusCode).toBe(204);
    });
    const moved = await move!;
    expect(moved.status).toBe(404);
    // The answer says what changed before it stopped.
    expect(((await moved.json()) as { message: string }).message).toMatch(/The move stopped part way \(10 of 20 files were moved\)/);
    const where = async (prefix: string) =>
      (await db.selectFrom('objects').select('path').where('workspace_id', '=', ws).where('path', 'like', `${prefix}/%`).execute()).length;
    // The file it waited at had passed its check; the next ones were not moved.
    expect(await where('dst')).toBe(10);
    expect(await where('src')).toBe(10);
  });
});

import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { login, startPlatform, type Platform } from './testing.js';

const USERS = 4;
const CLIENTS = 64;
const SECONDS = 10;

interface Account {
  email: string;
  token: string;
  workspace: string;
}

/**
 * Concurrent users never see each other's data: the platform as `npm start` runs it (embedded
 * PostgreSQL, requests through the gateway), four users with a workspace and a file each, 64
 * clients for 10 s. (On the PGlite version this failed: one answer in ~5,400 carried another
 * user's identity, and 55 were 500s, 401s for valid tokens, or 404s for a user's own workspace.)
 */
describe('isolation under concurrent load (embedded database, through the gateway)', () => {
  let platform: Platform | undefined;
  afterAll(() => platform?.child.kill('SIGKILL'));

  it(`${CLIENTS} clients of ${USERS} users for ${SECONDS} s: every answer belongs to its caller`, async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'codeagent-isolation-'));
    platform = await startPlatform(dataDir);
    const { url } = platform;
    const secrets = JSON.parse(readFileSync(join(dataDir, 'secrets.json'), 'utf8')) as { BOOTSTRAP_ADMIN_PASSWORD: string };
    const admin = await login(url, 'admin@localhost', secrets.BOOTSTRAP_ADMIN_PASSWORD);
    const json = { 'content-type': 'application/json' };

    const accounts: Account[] = [];
    for (let i = 0; i < USERS; i++) {
      const email = `user${i}@example.com`;
      const created = await fetch(`${url}/api/v1/platform/users`, {
        method: 'POST',
        headers: { authorization: `Bearer ${admin}`, ...json },
        body: JSON.stringify({ email, name: `User ${i}`, password: `password-of-${i}` }),
      });
      expect(created.status).toBe(201);
      const { id } = (await created.json()) as { id: string };
      const ws = await fetch(`${url}/api/v1/platform/workspaces`, {
        method: 'POST',
        headers: { authorization: `Bearer ${admin}`, ...json },
        body: JSON.stringify({ name: `workspace of ${email}`, admin_user_id: id }),
      });
      expect(ws.status).toBe(201);
      const workspace = ((await ws.json()) as { id: string }).id;
      const token = await login(url, email, `password-of-${i}`);
      const put = await fetch(`${url}/api/v1/data-resources/${workspace}/objects/whoami.txt`, {
        method: 'PUT',
        headers: { authorization: `Bearer ${token}` },
        body: `owner=${email}`,
      });
      expect(put.status).toBe(201);
      accounts.push({ email, token, workspace });
    }

    const counts = { answers: 0, foreignIdentity: 0, serverErrors: 0, unexpected401: 0, unexpected404: 0, otherFileNot404: 0, other: 0 };
    const examples: string[] = [];
    const note = (what: keyof typeof counts, detail: string) => {
      counts[what]++;
      if (examples.length < 10) examples.push(`${what}: ${detail}`);
    };
    const deadline = Date.now() + SECONDS * 1000;

    const client = async (c: number) => {
      const me = accounts[c % USERS]!;
      const other = accounts[(c + 1) % USERS]!;
      const auth = { authorization: `Bearer ${me.token}` };
      for (let n = c; Date.now() < deadline; n++) {
        const kind = n % 3;
        const target = kind === 0 ? `${url}/api/v1/auth/me` : `${url}/api/v1/data-resources/${kind === 1 ? me.workspace : other.workspace}/objects/whoami.txt`;
        const res = await fetch(target, { headers: auth });
        const body = await res.text();
        counts.answers++;
        if (res.status >= 500) note('serverErrors', `${res.status} ${target} ${body.slice(0, 120)}`);
        else if (kind === 0) {
          if (res.status === 401) note('unexpected401', body.slice(0, 120));
          else if (res.status !== 200) note('other', `${res.status} /auth/me`);
          else if ((JSON.parse(body) as { email: string }).email !== me.email) note('foreignIdentity', `${me.email} got ${body.slice(0, 120)}`);
        } else if (kind === 1) {
          if (res.status === 401) note('unexpected401', body.slice(0, 120));
          else if (res.status === 404) note('unexpected404', `${me.email}'s own file`);
          else if (res.status !== 200) note('other', `${res.status} own file`);
          else if (body !== `owner=${me.email}`) note('foreignIdentity', `${me.email} read ${body}`);
        } else if (res.status !== 404) {
          note(res.status === 200 ? 'foreignIdentity' : 'otherFileNot404', `${me.email} asked for ${other.email}'s file: ${res.status} ${body.slice(0, 80)}`);
        }
      }
    };
    await Promise.all(Array.from({ length: CLIENTS }, (_, c) => client(c)));

    const bad = counts.foreignIdentity + counts.serverErrors + counts.unexpected401 + counts.unexpected404 + counts.otherFileNot404 + counts.other;
    console.log(`isolation: ${JSON.stringify(counts)}`);
    expect({ ...counts, examples }).toMatchObject({ foreignIdentity: 0, serverErrors: 0, unexpected401: 0, unexpected404: 0, otherFileNot404: 0, other: 0 });
    expect(bad).toBe(0);
    expect(counts.answers).toBeGreaterThan(500);

    platform.child.kill('SIGTERM');
    expect(await platform.exited).toBe(0);
  }, 180_000);
});

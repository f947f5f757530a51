import { execFile } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { INGRESSES, startIngress, type Ingress } from '@codeagent/gateway/ingress-testing';
import { bearer, createAndLogin, startTestBackend, type TestBackend } from '../testing.js';

const run = promisify(execFile);
const RCLONE = '/usr/bin/rclone';
const sha = (b: Buffer | string) => createHash('sha256').update(b).digest('hex');

/**
 * A real WebDAV client drives the tree through each ingress (the gateway and nginx), as on a
 * laptop: Debian's rclone with `--webdav-url` and the token as the password (nothing is mounted).
 */
describe.each(INGRESSES)(`rclone against the WebDAV tree through %s (${process.env.CODEAGENT_TEST_DB ?? 'postgres'})`, (kind) => {
  let b: TestBackend;
  let editor: { id: string; token: string };
  let viewer: { id: string; token: string };
  let stranger: { id: string; token: string };
  let ws: string;
  let ingress: Ingress;
  let base: string;
  let home: string;

  beforeAll(async () => {
    if (!existsSync(RCLONE)) throw new Error(`${RCLONE} is missing: install Debian's rclone (scripts/system-deps.sh webdav, or apt-get install rclone)`);
    b = await startTestBackend();
    editor = await createAndLogin(b, 'rc-ed@example.com');
    viewer = await createAndLogin(b, 'rc-vi@example.com');
    stranger = await createAndLogin(b, 'rc-st@example.com');
    ws = (await b.app.inject({ method: 'POST', url: '/api/v1/platform/workspaces', headers: bearer(b.adminToken), payload: { name: 'rclone' } })).json<{
      id: string;
    }>().id;
    for (const [u, role] of [
      [editor, 'editor'],
      [viewer, 'viewer'],
    ] as const) {
      await b.app.inject({ method: 'POST', url: `/api/v1/platform/workspaces/${ws}/members`, headers: bearer(b.adminToken), payload: { user_id: u.id, role } });
    }
    const backendUrl = await b.app.listen({ host: '127.0.0.1', port: 0 });
    ingress = await startIngress(kind, { upstreams: { backend: backendUrl, clusterAdmin: 'http://127.0.0.1:9', bridge: 'http://127.0.0.1:9' } });
    base = ingress.base;
    home = mkdtempSync(join(tmpdir(), 'codeagent-rclone-'));
  });
  afterAll(async () => {
    await ingress?.close();
    await b?.close();
  });

  /** Runs rclone on the workspace as `token`'s user; resolves with its output or rejects with its error output. */
  const rclone = async (token: string, ...args: string[]) => {
    const { stdout: pass } = await run(RCLONE, ['obscure', token]);
    const { stdout } = await run(
      RCLONE,
      [
        '--config',
        join(home, 'rclone.conf'),
        '--webdav-url',
        `${base}/api/v1/dav/${ws}/`,
        '--webdav-user',
        'laptop',
        '--webdav-pass',
        pass.trim(),
        '--retries',
        '1',
        '--low-level-retries',
        '1',
        ...args,
      ],
      { env: { ...process.env, HOME: home } },
    );
    return stdout;
  };
  const api = (rest: string) => fetch(`${base}/api/v1/data-resources/${ws}/${rest}`, { headers: bearer(editor.token) });

  it('copies a local tree up, lists it, and a second copy of a changed file makes a version', async () => {
    const local = join(home, 'up');
    mkdirSync(join(local, 'sub', 'deep'), { recursive: true });
    const big = randomBytes(300 * 1024);
    writeFileSync(join(local, 'a.txt'), 'first');
    writeFileSync(join(local, 'sub', 'b.csv'), 'x,y\n1,2\n');
    writeFileSync(join(local, 'sub', 'deep', 'c.bin'), big);
    await rclone(editor.token, 'copy', local, ':webdav:');

    const listing = await rclone(editor.token, 'ls', ':webdav:');
    const sizes = Object.fromEntries(
      listing
        .trim()
        .split('\n')
        .map((l) => l.trim().split(/\s+/).reverse() as [string, string]),
    );
    expect(sizes).toEqual({ 'a.txt': '5', 'sub/b.csv': '8', 'sub/deep/c.bin': String(big.length) });
    const stat = await fetch(`${base}/api/v1/data-resources/${ws}/objects/sub/deep/c.bin`, { method: 'HEAD', headers: bearer(editor.token) });
    expect(stat.headers.get('etag')).toBe(`"${sha(big)}"`);

    writeFileSync(join(local, 'a.txt'), 'second version');
    await rclone(editor.token, 'copy', local, ':webdav:');
    const versions = (await (await api('versions/a.txt')).json()) as { items: { size: number; created_by: string }[] };
    expect(versions.items.map((v) => v.size)).toEqual([14, 5]);
    expect(versions.items[0]!.created_by).toBe(editor.id);

    const down = join(home, 'down');
    await rclone(editor.token, 'copy', ':webdav:', down);
    expect(readFileSync(join(down, 'a.txt'), 'utf8')).toBe('second version');
    expect(sha(readFileSync(join(down, 'sub', 'deep', 'c.bin')))).toBe(sha(big));
  });

  it('makes folders, moves files on the server (versions follow) and purges a folder to the trash', async () => {
    await rclone(editor.token, 'mkdir', ':webdav:empty/inner');
    expect((await rclone(editor.token, 'lsf', ':webdav:')).split('\n')).toEqual(expect.arrayContaining(['empty/', 'sub/', 'a.txt']));
    expect(await rclone(editor.token, 'lsf', ':webdav:empty')).toBe('inner/\n');

    await rclone(editor.token, 'moveto', ':webdav:a.txt', ':webdav:moved/a.txt');
    expect((await api('objects/a.txt')).status).toBe(404);
    const versions = (await (await api('versions/moved/a.txt')).json()) as { items: unknown[] };
    expect(versions.items).toHaveLength(2);

    await rclone(editor.token, 'purge', ':webdav:sub');
    expect(await rclone(editor.token, 'lsf', ':webdav:')).not.toContain('sub/');
    const trash = (await (await api('trash')).json()) as { items: { path: string }[] };
    expect(trash.items.map((t) => t.path)).toEqual(expect.arrayContaining(['sub/b.csv', 'sub/deep/c.bin']));
  });

  it('lets a viewer list and download but not upload; a non-member sees nothing', async () => {
    expect(await rclone(viewer.token, 'lsf', ':webdav:moved')).toBe('a.txt\n');
    const local = join(home, 'viewer');
    mkdirSync(local);
    writeFileSync(join(local, 'v.txt'), 'viewer was here');
    await expect(rclone(viewer.token, 'copy', local, ':webdav:')).rejects.toThrow(/403|Forbidden/);
    expect((await api('objects/v.txt')).status).toBe(404);
    await expect(rclone(stranger.token, 'lsf', ':webdav:')).rejects.toThrow(/404|not found/i);
    await expect(rclone('not-a-token', 'lsf', ':webdav:')).rejects.toThrow(/401|Unauthorized/i);
  });
});

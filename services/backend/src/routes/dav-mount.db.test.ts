import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { access, mkdir, readFile, readdir, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { buildGatewayApp } from '@codeagent/gateway';
import { INSTALL_MOUNT_HINT, RCLONE, isMounted, mountWorkspace, type WorkspaceMount } from '@codeagent/runtime';
import { bearer, createAndLogin, startTestBackend, type TestBackend } from '../testing.js';

/** Waits for a condition that an asynchronous upload or cache expiry makes true (no time is asserted). */
async function eventually<T>(probe: () => Promise<T | undefined>, what: string, limitMs = 30_000): Promise<T> {
  const deadline = Date.now() + limitMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`${what}: still not so after ${limitMs} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

// A FUSE device is a property of the machine (a container may lack it), not a package: without
// it the mount cannot be tried, and the suite says so. rclone and fuse3 missing is a failure.
const fuse = existsSync('/dev/fuse');
if (!fuse) console.warn('dav-mount: /dev/fuse is missing on this machine; the rclone mount tests are skipped');

/**
 * The file-mount helper (issue 15 item 2): `rclone mount` of a workspace's tree, as kernels will
 * see it. The backend serves the tree from this same process, so files in the mount are touched
 * only with asynchronous calls: a synchronous one would block the server that FUSE waits for.
 */
describe.skipIf(!fuse)(`rclone mount of a workspace (${process.env.CODEAGENT_TEST_DB ?? 'postgres'})`, () => {
  let b: TestBackend;
  let editor: { id: string; token: string };
  let ws: string;
  let gateway: FastifyInstance;
  let base: string;
  let mount: WorkspaceMount;
  const home = mkdtempSync(join(tmpdir(), 'codeagent-mount-'));
  const mountpoint = join(home, 'ws');

  beforeAll(async () => {
    if (!existsSync(RCLONE) || !existsSync('/usr/bin/fusermount3')) throw new Error(`rclone or fuse3 is missing: ${INSTALL_MOUNT_HINT}`);
    b = await startTestBackend();
    editor = await createAndLogin(b, 'mount-ed@example.com');
    ws = (await b.app.inject({ method: 'POST', url: '/api/v1/platform/workspaces', headers: bearer(b.adminToken), payload: { name: 'mount' } })).json<{
      id: string;
    }>().id;
    await b.app.inject({
      method: 'POST',
      url: `/api/v1/platform/workspaces/${ws}/members`,
      headers: bearer(b.adminToken),
      payload: { user_id: editor.id, role: 'editor' },
    });
    const backendUrl = await b.app.listen({ host: '127.0.0.1', port: 0 });
    gateway = await buildGatewayApp({ upstreams: { backend: backendUrl, clusterAdmin: 'http://127.0.0.1:9', bridge: 'http://127.0.0.1:9' } });
    base = await gateway.listen({ host: '127.0.0.1', port: 0 });
    mount = await mountWorkspace({
      davUrl: `${base}/api/v1/dav/${ws}/`,
      token: editor.token,
      mountpoint,
      cacheDir: join(home, 'cache'),
      remoteControl: true,
      dirCacheSeconds: 1,
    });
  });
  afterAll(async () => {
    await mount?.unmount();
    await gateway?.close();
    await b?.close();
  });

  const api = (rest: string) => fetch(`${base}/api/v1/data-resources/${ws}/${rest}`, { headers: bearer(editor.token) });

  it('refuses remote-control calls without the generated credentials, and keeps the token off the command line', async () => {
    const rc = mount.remoteControl!;
    expect(new URL(rc.url).hostname).toBe('127.0.0.1');
    const anonymous = await fetch(new URL('core/version', rc.url), { method: 'POST' });
    expect(anonymous.status).toBe(401);
    const wrong = await fetch(new URL('core/version', rc.url), {
      method: 'POST',
      headers: { authorization: `Basic ${Buffer.from(`${rc.user}:guess`).toString('base64')}` },
    });
    expect(wrong.status).toBe(401);
    const right = await fetch(new URL('core/version', rc.url), {
      method: 'POST',
      headers: { authorization: `Basic ${Buffer.from(`${rc.user}:${rc.password}`).toString('base64')}` },
    });
    expect(right.status).toBe(200);
    const cmdline = readFileSync(`/proc/${mount.pid}/cmdline`, 'utf8');
    expect(cmdline).not.toContain(editor.token);
    expect(cmdline).not.toContain(rc.password);
  });

  it('turns a file written in the mount into a workspace object, and a second save into a version', async () => {
    expect(isMounted(mountpoint)).toBe(true);
    await writeFile(join(mountpoint, 'out.csv'), 'a,b\n1,2\n');
    await eventually(async () => ((await api('objects/out.csv')).status === 200 ? true : undefined), 'out.csv uploaded');
    expect(await (await api('objects/out.csv')).text()).toBe('a,b\n1,2\n');
    await writeFile(join(mountpoint, 'out.csv'), 'a,b\n1,2\n3,4\n');
    const versions = await eventually(async () => {
      const list = (await (await api('versions/out.csv')).json()) as { items: { size: number }[] };
      return list.items.length === 2 ? list.items : undefined;
    }, 'second save versioned');
    expect(versions.map((v) => v.size)).toEqual([12, 8]);
  });

  it('shows a file uploaded through the API in the mount', async () => {
    await fetch(`${base}/api/v1/data-resources/${ws}/objects/data/sample.csv`, {
      method: 'PUT',
      headers: { ...bearer(editor.token), 'content-type': 'text/csv' },
      body: 'x\n42\n',
    });
    await mount.refresh();
    await eventually(
      () =>
        access(join(mountpoint, 'data', 'sample.csv')).then(
          () => true,
          () => undefined,
        ),
      'data/sample.csv visible',
    );
    expect(await readFile(join(mountpoint, 'data', 'sample.csv'), 'utf8')).toBe('x\n42\n');
    expect((await readdir(mountpoint)).sort()).toEqual(['data', 'out.csv']);
  });

  /** A second mount of the workspace at `mountpoint` whose listings are believed for an hour: nothing but a refresh lists again. */
  const hourCacheMount = (mountpoint: string) =>
    mountWorkspace({
      davUrl: `${base}/api/v1/dav/${ws}/`,
      token: editor.token,
      mountpoint,
      cacheDir: `${mountpoint}-cache`,
      remoteControl: true,
      dirCacheSeconds: 3600,
    });
  /** Stores `body` at `path` through the API. */
  const put = (path: string, body: string) =>
    fetch(`${base}/api/v1/data-resources/${ws}/objects/${path}`, { method: 'PUT', headers: { ...bearer(editor.token), 'content-type': 'text/plain' }, body });

  // Decision 0221: rclone answers a lookup of a file it wrote from its own memory until the
  // folder is listed again, whatever the platform stored since; the runtime lists changed folders
  // again (`refreshFolder`). Here with a directory cache of an hour, so nothing else refreshes.
  it('lists a folder again on demand: a file it wrote and the API replaced, and a folder new to it two levels down', async () => {
    const long = join(home, 'long');
    const other = await hourCacheMount(long);
    try {
      const since = new Date();
      await writeFile(join(long, 'mine.txt'), 'mine');
      // Stored, and rclone done with its upload (under load it still set the file's object from
      // its own upload after the API's change, CI 2026-11-28).
      await eventually(async () => ((await other.uploadOf('mine.txt', since)) === 'stored' ? true : undefined), 'mine.txt uploaded');
      expect(await (await api('objects/mine.txt')).text()).toBe('mine');
      expect((await put('mine.txt', 'theirs!')).status).toBe(200);
      expect(await readFile(join(long, 'mine.txt'), 'utf8')).toBe('mine');
      await other.refreshFolder('');
      expect(await readFile(join(long, 'mine.txt'), 'utf8')).toBe('theirs!');

      expect((await put('fresh/deeper/new.txt', 'new')).status).toBe(201);
      await expect(access(join(long, 'fresh', 'deeper', 'new.txt'))).rejects.toThrow();
      await other.refreshFolder('fresh/deeper');
      expect(await readFile(join(long, 'fresh', 'deeper', 'new.txt'), 'utf8')).toBe('new');
    } finally {
      await other.unmount();
    }
  }, 60_000);

  // Decision 0236: after the runtime's listener reconnects, changes it was not told of are found
  // by listing every folder again.
  it('lists every folder again: files it wrote and the API replaced in several folders, and a folder new to it', async () => {
    const tree = join(home, 'tree');
    const other = await hourCacheMount(tree);
    try {
      const since = new Date();
      await mkdir(join(tree, 'one', 'two'), { recursive: true });
      await writeFile(join(tree, 'top.txt'), 'mine');
      await writeFile(join(tree, 'one', 'two', 'deep.txt'), 'mine');
      for (const path of ['top.txt', 'one/two/deep.txt']) {
        await eventually(async () => ((await other.uploadOf(path, since)) === 'stored' ? true : undefined), `${path} uploaded`);
      }
      expect((await put('top.txt', 'theirs!')).status).toBe(200);
      expect((await put('one/two/deep.txt', 'theirs too')).status).toBe(200);
      expect((await put('one/new/fresh.txt', 'new')).status).toBe(201);
      expect(await readFile(join(tree, 'one', 'two', 'deep.txt'), 'utf8')).toBe('mine');
      await other.refreshTree();
      expect(await readFile(join(tree, 'top.txt'), 'utf8')).toBe('theirs!');
      expect(await readFile(join(tree, 'one', 'two', 'deep.txt'), 'utf8')).toBe('theirs too');
      expect(await readFile(join(tree, 'one', 'new', 'fresh.txt'), 'utf8')).toBe('new');
    } finally {
      await other.unmount();
    }
  }, 60_000);

  it('unmounts', async () => {
    await mount.unmount();
    expect(isMounted(mountpoint)).toBe(false);
  });
});

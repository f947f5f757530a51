// Each member's JupyterLab settings and layouts, answered by the runtime from the platform's
// database (decisions 0251, 0252), behind the real lab proxy in front of a hostile server.
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { USER_ID_HEADER } from '@codeagent/auth';
import { createTestDatabase, type TestDatabase } from '@codeagent/db';
import { defaultLabHost } from './lab-host.js';
import { labProxy, type LabProxy } from './lab-proxy.js';
import { databaseLabState, importLabStateFiles } from './lab-state.js';
import type { JupyterPool, JupyterServerRef } from './servers.js';

const TOKEN = 'lab-token';
const WS = '33333333-3333-4333-8333-333333333333';
const EVIL = 'window.PWNED = document.cookie';

describe(`each user's lab settings and layouts in the database (${process.env.CODEAGENT_TEST_DB ?? 'postgres'})`, () => {
  let t: TestDatabase;
  let dir: string;
  let fake: Server;
  /** Two runtimes on one database. */
  const labs: LabProxy[] = [];
  const fronts: Server[] = [];
  const bases: string[] = [];
  const alice = { [USER_ID_HEADER]: randomUUID() };
  const bob = { [USER_ID_HEADER]: randomUUID() };

  beforeAll(async () => {
    t = await createTestDatabase();
    for (const [i, user] of [alice, bob].entries())
      await t.database.db
        .insertInto('users')
        .values({ id: user[USER_ID_HEADER], email: `u${i}@example.com`, name: `u${i}`, password_hash: 'x', platform_role_id: 'user' })
        .execute();
    dir = mkdtempSync(join(tmpdir(), 'lab-state-'));
    const socket = join(dir, 'jupyter.sock');
    // The workspace's server, taken over by its kernel: whatever it answers must not be what a user gets.
    fake = createServer((_req, res) => {
      res
        .writeHead(200, { 'content-type': 'application/json' })
        .end(
          JSON.stringify({ settings: [{ id: '@evil/extension:plugin', schema: {}, raw: EVIL, settings: {} }], data: { evil: EVIL }, metadata: { id: EVIL } }),
        );
    });
    await new Promise<void>((r) => fake.listen(socket, r));
    const ref = { workspaceId: WS, running: true, touch: () => undefined, socket: { path: socket, token: 'inner', basePath: `/jupyter/${WS}/` } };
    const pool = {
      lab: defaultLabHost(),
      server: () => Promise.resolve(ref as unknown as JupyterServerRef),
      running: () => [],
      status: () => ({ state: 'running' }),
      stop: () => Promise.resolve(),
    } as JupyterPool;
    for (let i = 0; i < 2; i++) {
      const lab = labProxy({ pool, token: TOKEN, log: pino({ level: 'silent' }), labState: databaseLabState(() => Promise.resolve(t.database.db)) });
      const front = createServer((req, res) => lab.request(req, res));
      await new Promise<void>((r) => front.listen(0, '127.0.0.1', r));
      labs.push(lab);
      fronts.push(front);
      bases.push(`http://127.0.0.1:${(front.address() as { port: number }).port}`);
    }
  });
  afterAll(async () => {
    for (const lab of labs) lab.closeAll();
    await Promise.all(fronts.map((f) => new Promise((r) => f.close(r))));
    await new Promise((r) => fake?.close(r));
    rmSync(dir, { recursive: true, force: true });
    await t?.drop();
  });

  const call = (method: string, path: string, user: Record<string, string>, body?: string, runtime = 0) =>
    fetch(`${bases[runtime]}/jupyter/${WS}${path}`, {
      method,
      headers: { authorization: `token ${TOKEN}`, 'content-type': 'application/json', ...user },
      ...(body === undefined ? {} : { body }),
    });

  it('answers the settings of the user the gateway names from that user’s own store, on every runtime, never from the server', async () => {
    const shortcuts = '/lab/api/settings/@jupyterlab/shortcuts-extension:shortcuts';
    // Every installed plugin with its installed schema and no user value; nothing of the server's.
    const list = (await (await call('GET', '/lab/api/settings', alice)).json()) as { settings: Array<{ id: string; raw: string; version: string }> };
    const ids = list.settings.map((e) => e.id);
    expect(ids).toEqual(expect.arrayContaining(['@jupyterlab/shortcuts-extension:shortcuts', '@jupyterlab/apputils-extension:themes']) as unknown);
    expect(ids).toHaveLength(new Set(ids).size);
    expect(ids).not.toContain('@evil/extension:plugin');
    expect(list.settings.every((e) => e.raw === '{}')).toBe(true);
    expect(list.settings.find((e) => e.id === '@jupyterlab/apputils-extension:themes')?.version).toBe('4.5.10');
    expect(JSON.stringify(list)).not.toContain(EVIL);
    // Alice's own shortcut (JSON5, as the settings editor writes it) is hers, on the other runtime
    // too: Bob's stay the defaults.
    const raw = "{\n  // mine\n  shortcuts: [{command: 'notebook:run-all-cells', keys: ['Alt R'], selector: 'body'}],\n}";
    expect((await call('PUT', shortcuts, alice, JSON.stringify({ raw }))).status).toBe(204);
    for (const runtime of [0, 1]) {
      const hers = (await (await call('GET', shortcuts, alice, undefined, runtime)).json()) as { raw: string; settings: unknown; last_modified: string | null };
      expect(hers).toMatchObject({ raw, settings: { shortcuts: [{ command: 'notebook:run-all-cells', keys: ['Alt R'], selector: 'body' }] } });
      expect(hers.last_modified).not.toBeNull();
      const listed = (await (await call('GET', '/lab/api/settings', alice, undefined, runtime)).json()) as { settings: Array<{ id: string; raw: string }> };
      expect(listed.settings.find((e) => e.id === '@jupyterlab/shortcuts-extension:shortcuts')?.raw).toBe(raw);
    }
    expect((await (await call('GET', shortcuts, bob)).json()) as unknown).toMatchObject({ raw: '{}', settings: {} });
    // Saved again: the new text, a later modification time, the same creation time.
    const first = (await (await call('GET', shortcuts, alice)).json()) as { created: string; last_modified: string };
    await new Promise((r) => setTimeout(r, 20));
    expect((await call('PUT', shortcuts, alice, JSON.stringify({ raw: '{}' }), 1)).status).toBe(204);
    const second = (await (await call('GET', shortcuts, alice)).json()) as { raw: string; created: string; last_modified: string };
    expect(second.raw).toBe('{}');
    expect(second.created).toBe(first.created);
    expect(Date.parse(second.last_modified)).toBeGreaterThan(Date.parse(first.last_modified));
    expect((await call('PUT', shortcuts, alice, JSON.stringify({ raw }))).status).toBe(204);
    // Refusals, each leaving the stored text as it was: an unknown plugin, not JSON5, not an
    // object, no raw, too large, another method.
    expect((await call('PUT', '/lab/api/settings/@evil/extension:plugin', alice, JSON.stringify({ raw: '{}' }))).status).toBe(404);
    expect((await call('PUT', shortcuts, alice, JSON.stringify({ raw: '{shortcuts: [' }))).status).toBe(400);
    expect((await call('PUT', shortcuts, alice, JSON.stringify({ raw: '[1]' }))).status).toBe(400);
    expect((await call('PUT', shortcuts, alice, '{"no": "raw"}')).status).toBe(400);
    expect((await call('PUT', shortcuts, alice, JSON.stringify({ raw: `{"x": "${'x'.repeat(300 * 1024)}"}` }))).status).toBe(413);
    expect((await call('DELETE', shortcuts, alice)).status).toBe(405);
    expect(((await (await call('GET', shortcuts, alice)).json()) as { raw: string }).raw).toBe(raw);
    // The translation settings stay the defaults (their locale is a URL JupyterLab loads code from).
    const translation = '/lab/api/settings/@jupyterlab/translation-extension:plugin';
    expect((await call('PUT', translation, alice, JSON.stringify({ raw: '{"locale": "%2e%2e/evil"}' }))).status).toBe(204);
    expect((await (await call('GET', translation, alice)).json()) as unknown).toMatchObject({ raw: '{}', settings: {} });
    // A header that names no user id: the server answers, checked as before (decision 0249).
    const relayed = await call('GET', '/lab/api/settings', { [USER_ID_HEADER]: '../../etc' });
    expect(await relayed.json()).toMatchObject({ settings: [] });
  });

  it('answers the layouts of the user the gateway names from that user’s own store; the count holds across runtimes', async () => {
    const layout = { data: { 'layout-restorer:data': { main: { current: 'notebook:secret-plans.ipynb' } } }, metadata: { id: '/default' } };
    const ws = (path: string) => `/lab/api/workspaces${path}`;
    // None stored: the empty layout, as jupyterlab_server answers.
    expect(await (await call('GET', ws('/default'), alice)).json()).toEqual({ data: {}, metadata: { id: '/default' } });
    expect((await call('PUT', ws('/default'), alice, JSON.stringify(layout))).status).toBe(204);
    for (const runtime of [0, 1]) {
      const hers = (await (await call('GET', ws('/default'), alice, undefined, runtime)).json()) as {
        data: unknown;
        metadata: { id: string; last_modified: string };
      };
      expect(hers.data).toEqual(layout.data);
      expect(hers.metadata.last_modified).toEqual(expect.any(String));
      expect(await (await call('GET', ws(''), alice, undefined, runtime)).json()).toMatchObject({
        workspaces: { ids: ['/default'], values: [{ data: layout.data }] },
      });
    }
    // Bob sees none of it.
    expect(await (await call('GET', ws('/default'), bob)).json()).toEqual({ data: {}, metadata: { id: '/default' } });
    expect(await (await call('GET', ws(''), bob)).json()).toEqual({ workspaces: { ids: [], values: [] } });
    // Refusals: another id than the name, not JSON, a name that is no layout name, no name.
    expect((await call('PUT', ws('/other'), alice, JSON.stringify(layout))).status).toBe(400);
    expect((await call('PUT', ws('/default'), alice, '{')).status).toBe(400);
    expect((await call('GET', ws('/a.b'), alice)).status).toBe(404);
    expect((await call('GET', ws('/..%2f..%2fetc'), alice)).status).toBe(400);
    expect((await call('PUT', ws(''), alice, JSON.stringify(layout))).status).toBe(400);
    // 60 new layouts at once, half through each runtime: 49 join the one she has, 11 are refused.
    const names = Array.from({ length: 60 }, (_, i) => `w${i + 1}`);
    const saves = await Promise.all(names.map((n, i) => call('PUT', ws(`/${n}`), alice, JSON.stringify({ data: {}, metadata: { id: `/${n}` } }), i % 2)));
    expect(saves.filter((r) => r.status === 204)).toHaveLength(49);
    expect(saves.filter((r) => r.status === 409)).toHaveLength(11);
    expect(((await (await call('GET', ws(''), alice)).json()) as { workspaces: { ids: string[] } }).workspaces.ids).toHaveLength(50);
    const kept = names.find((_, i) => saves[i]!.status === 204)!;
    const refused = names.find((_, i) => saves[i]!.status === 409)!;
    // Replacing one is always possible; a new one once another is gone.
    expect((await call('PUT', ws('/default'), alice, JSON.stringify(layout))).status).toBe(204);
    expect((await call('DELETE', ws(`/${kept}`), alice)).status).toBe(204);
    expect((await call('DELETE', ws(`/${kept}`), alice, undefined, 1)).status).toBe(404);
    // An id without its leading slash is the same layout (jupyterlab_server takes both).
    expect((await call('PUT', ws(`/${refused}`), alice, JSON.stringify({ data: {}, metadata: { id: refused } }))).status).toBe(204);
    // Bob's own count is his: his first layout is taken while Alice is full.
    expect((await call('PUT', ws('/default'), bob, JSON.stringify(layout))).status).toBe(204);
  });

  it('moves the files an earlier runtime kept (DATA_DIR/lab-settings) into the database once, for users that exist, then removes them', async () => {
    const carol = randomUUID();
    await t.database.db
      .insertInto('users')
      .values({ id: carol, email: 'carol@example.com', name: 'carol', password_hash: 'x', platform_role_id: 'user' })
      .execute();
    const gone = randomUUID();
    const old = join(dir, 'lab-settings');
    const write = (path: string, text: string) => {
      mkdirSync(join(old, path, '..'), { recursive: true });
      writeFileSync(join(old, path), text);
    };
    const bridge = '@codeagent/bridge-extension:plugin';
    write(`${carol}/${encodeURIComponent(bridge)}.json5`, '{"password": "carol-secret"}');
    write(`${carol}/workspaces/default.json`, JSON.stringify({ data: { a: 1 }, metadata: { id: '/default' } }));
    write(`${carol}/%E0%A4%A.json5`, '{}');
    write(`${gone}/${encodeURIComponent(bridge)}.json5`, '{"password": "gone"}');
    write('not-a-user/x.json5', '{}');
    // What the database holds already wins.
    await t.database.db.insertInto('lab_layouts').values({ user_id: carol, name: 'default', layout: '{"kept": true}' }).execute();
    expect(await importLabStateFiles(t.database.db, old)).toEqual({ settings: 1, layouts: 0 });
    expect(existsSync(old)).toBe(false);
    const settings = await t.database.db.selectFrom('lab_settings').selectAll().where('user_id', 'in', [carol, gone]).execute();
    expect(settings.map((s) => [s.user_id, s.plugin_id, s.raw])).toEqual([[carol, bridge, '{"password": "carol-secret"}']]);
    const layouts = await t.database.db.selectFrom('lab_layouts').select('layout').where('user_id', '=', carol).execute();
    expect(layouts).toEqual([{ layout: '{"kept": true}' }]);
    // No folder: nothing to do.
    expect(await importLabStateFiles(t.database.db, old)).toBeUndefined();
  });
});

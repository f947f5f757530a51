import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ErrorBody, ListPage } from '@codeagent/service-kit';
import { addMembers, bearer, createAndLogin, createWorkspace, disableUser, startTestBackend, type TestBackend } from '../testing.js';

interface Member {
  workspace_id: string;
  user_id: string;
  email: string;
  name: string;
  role: string;
}

describe(`a workspace's members, read by its members (${process.env.CODEAGENT_TEST_DB ?? 'postgres'})`, () => {
  let b: TestBackend;
  let editor: { id: string; token: string };
  let viewer: { id: string; token: string };
  let stranger: { id: string; token: string };
  let ws: string;
  let other: string;
  beforeAll(async () => {
    b = await startTestBackend();
    editor = await createAndLogin(b, 'team-editor@example.com');
    viewer = await createAndLogin(b, 'team-viewer@example.com');
    stranger = await createAndLogin(b, 'team-stranger@example.com');
    ws = await createWorkspace(b, 'team');
    other = await createWorkspace(b, 'other team');
    await addMembers(b, ws, [
      [editor, 'editor'],
      [viewer, 'viewer'],
    ]);
    await addMembers(b, other, [[stranger, 'admin']]);
  });
  afterAll(async () => {
    await b.close();
  });

  const get = (token: string | undefined, url: string) =>
    b.app.inject({ method: 'GET', url: `/api/v1/workspaces/${url}`, headers: token === undefined ? {} : bearer(token) });

  it('every member, a viewer too, reads who is in the workspace with their roles', async () => {
    for (const who of [viewer, editor]) {
      const res = await get(who.token, `${ws}/members`);
      expect(res.statusCode).toBe(200);
      const members = res.json<ListPage<Member>>().items;
      expect(members.map((m) => [m.email, m.role]).sort()).toEqual(
        [
          ['admin@localhost', 'admin'],
          ['team-editor@example.com', 'editor'],
          ['team-viewer@example.com', 'viewer'],
        ].sort(),
      );
      expect(members.find((m) => m.user_id === editor.id)).toMatchObject({ workspace_id: ws, name: expect.any(String) as string });
    }
    // Paged like every list.
    const first = (await get(viewer.token, `${ws}/members?limit=2`)).json<ListPage<Member>>();
    expect(first.items).toHaveLength(2);
    const rest = (await get(viewer.token, `${ws}/members?limit=2&cursor=${first.next_cursor}`)).json<ListPage<Member>>();
    expect(rest.items).toHaveLength(1);
    expect(rest.next_cursor).toBeNull();
  });

  it('a non-member gets 404 (the workspace is not confirmed to exist), a logged-out caller 401, and nobody changes members here', async () => {
    const res = await get(stranger.token, `${ws}/members`);
    expect(res.statusCode).toBe(404);
    expect(res.json<ErrorBody>().error).toBe('not_found');
    expect(res.body).not.toContain('team-editor@example.com');
    expect((await get(stranger.token, `00000000-0000-4000-8000-000000000000/members`)).statusCode).toBe(404);
    expect((await get(undefined, `${ws}/members`)).statusCode).toBe(401);
    // A member of this workspace does not read the members of another one.
    const across = await get(editor.token, `${other}/members`);
    expect(across.statusCode).toBe(404);
    expect(across.body).not.toContain('team-stranger@example.com');
    // Changing members stays with system administrators (§4.2).
    const add = await b.app.inject({
      method: 'POST',
      url: `/api/v1/workspaces/${ws}/members`,
      headers: bearer(editor.token),
      payload: { user_id: stranger.id, role: 'viewer' },
    });
    expect(add.statusCode).toBe(405);
    const platform = await b.app.inject({ method: 'GET', url: `/api/v1/platform/workspaces/${ws}/members`, headers: bearer(editor.token) });
    expect(platform.statusCode).toBe(403);
  });

  it('a member whose account is disabled reads nothing more (401)', async () => {
    const leaving = await createAndLogin(b, 'team-leaving@example.com');
    await addMembers(b, ws, [[leaving, 'viewer']]);
    expect((await get(leaving.token, `${ws}/members`)).statusCode).toBe(200);
    await disableUser(b, leaving.id);
    const res = await get(leaving.token, `${ws}/members`);
    expect(res.statusCode).toBe(401);
    expect(res.body).not.toContain('team-editor@example.com');
  });
});

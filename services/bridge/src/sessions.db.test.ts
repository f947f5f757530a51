import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '@codeagent/db';
import { SessionMap, sessionKey, type SessionOwner } from './sessions.js';

describe(`bridge session map (${process.env.CODEAGENT_TEST_DB ?? 'postgres'})`, () => {
  let t: TestDatabase;
  let map: SessionMap;
  let a: string;
  let b: string;
  let ws1: string;
  let ws2: string;
  const URL_ = 'http://127.0.0.1:4096';

  beforeAll(async () => {
    t = await createTestDatabase();
    map = new SessionMap(t.database.db);
    const user = (email: string) =>
      t.database.db.insertInto('users').values({ email, name: email, password_hash: 'x', platform_role_id: 'user' }).returning('id').executeTakeFirstOrThrow();
    a = (await user('a@example.com')).id;
    b = (await user('b@example.com')).id;
    ws1 = (await t.database.db.insertInto('workspaces').values({ name: 'one' }).returning('id').executeTakeFirstOrThrow()).id;
    ws2 = (await t.database.db.insertInto('workspaces').values({ name: 'two' }).returning('id').executeTakeFirstOrThrow()).id;
  });
  afterAll(() => t.drop());

  it('keys sessions by user, workspace and path: no two owners share a mapping', async () => {
    const owners: SessionOwner[] = [
      { userId: a, workspaceId: null },
      { userId: b, workspaceId: null },
      { userId: a, workspaceId: ws1 },
      { userId: a, workspaceId: ws2 },
      { userId: b, workspaceId: ws1 },
    ];
    for (const [i, owner] of owners.entries()) await map.set(owner, 'Untitled.ipynb', `ses_${i}`, URL_);
    for (const [i, owner] of owners.entries()) {
      expect(await map.get(owner, 'Untitled.ipynb', URL_)).toBe(`ses_${i}`);
      expect((await map.list(owner)).map((s) => s.session_id)).toEqual([`ses_${i}`]);
    }
    expect(new Set(owners.map((o) => sessionKey(o, 'Untitled.ipynb'))).size).toBe(owners.length);

    // setting again replaces the owner's mapping (both kinds of key), and no other
    await map.set(owners[0]!, 'Untitled.ipynb', 'ses_new0', URL_);
    await map.set(owners[2]!, 'Untitled.ipynb', 'ses_new2', URL_);
    expect(await map.get(owners[0]!, 'Untitled.ipynb', URL_)).toBe('ses_new0');
    expect(await map.get(owners[2]!, 'Untitled.ipynb', URL_)).toBe('ses_new2');
    expect(await map.get(owners[1]!, 'Untitled.ipynb', URL_)).toBe('ses_1');
    expect(
      Number(
        (
          await t.database.db
            .selectFrom('bridge_sessions')
            .select((eb) => eb.fn.countAll().as('n'))
            .executeTakeFirstOrThrow()
        ).n,
      ),
    ).toBe(5);

    // drop removes the owner's mapping only
    expect(await map.drop(owners[1]!, 'Untitled.ipynb')).toEqual({ session_id: 'ses_1', upstream_url: URL_ });
    expect(await map.drop(owners[1]!, 'Untitled.ipynb')).toBeUndefined();
    expect(await map.get(owners[0]!, 'Untitled.ipynb', URL_)).toBe('ses_new0');
    expect(await map.get(owners[4]!, 'Untitled.ipynb', URL_)).toBe('ses_4');
  });

  it('ignores a mapping made for another code-agent server', async () => {
    await map.set({ userId: a, workspaceId: null }, 'other.ipynb', 'ses_x', 'http://agent.internal:4096');
    expect(await map.get({ userId: a, workspaceId: null }, 'other.ipynb', URL_)).toBeUndefined();
  });

  it('evicts the least recently used mappings of one owner beyond the cap, and nobody else', async () => {
    const owner: SessionOwner = { userId: a, workspaceId: ws2 };
    const other: SessionOwner = { userId: a, workspaceId: ws1 };
    for (let i = 0; i < 5; i++) {
      await map.set(owner, `nb/${i}.ipynb`, `ses_lru${i}`, URL_);
      await t.database.db
        .updateTable('bridge_sessions')
        .set({ last_used_at: new Date(Date.UTC(2030, 0, 1, 0, i)) })
        .where('session_id', '=', `ses_lru${i}`)
        .execute();
    }
    await t.database.db
      .updateTable('bridge_sessions')
      .set({ last_used_at: new Date(Date.UTC(2030, 0, 2)) })
      .where('session_id', '=', 'ses_lru0')
      .execute();
    const otherBefore = await map.list(other);
    const evicted = await map.evictBeyond(owner, 3);
    expect(evicted.map((e) => e.session_id).sort()).toEqual(['ses_3', 'ses_lru1', 'ses_lru2'].sort());
    expect((await map.list(owner)).map((x) => x.session_id)).toEqual(['ses_lru0', 'ses_lru4', 'ses_lru3']);
    expect(await map.list(other)).toEqual(otherBefore);
    expect(await map.evictBeyond(owner, 3)).toEqual([]);
  });

  it("removes a user's mappings with the user", async () => {
    await t.database.db.deleteFrom('users').where('id', '=', b).execute();
    expect(await t.database.db.selectFrom('bridge_sessions').select('id').where('user_id', '=', b).execute()).toEqual([]);
  });
});

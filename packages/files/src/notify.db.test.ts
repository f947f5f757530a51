import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Listener } from '@codeagent/db';
import type { WorkspaceFiles } from './files.js';
import { createTestFiles, type TestFiles } from './testing.js';

const put = (files: WorkspaceFiles, ws: string, path: string, body: string, modifiedAt?: Date) =>
  files.put(ws, path, Readable.from([Buffer.from(body)]), { actor: null, ...(modifiedAt ? { modifiedAt } : {}) });

/**
 * Decision 0221: every committed change of a workspace's objects notifies `workspace_files` with
 * the workspace and the folder it changed, once per folder and statement, so that the runtime
 * lists that folder again in the workspace's mount. Decision 0220: a mount client's own time is
 * kept beside the platform's, and any other write clears it.
 */
describe(`changes of a workspace's files are notified by folder (${process.env.CODEAGENT_TEST_DB ?? 'postgres'})`, () => {
  let fixture: TestFiles;
  let files: WorkspaceFiles;
  let ws: string;
  let listener: Listener;
  const heard: string[] = [];
  beforeAll(async () => {
    fixture = await createTestFiles('notify');
    ({ files } = fixture);
    ws = await fixture.newWorkspace('notify');
    let up: () => void;
    const connected = new Promise<void>((r) => (up = r));
    listener = fixture.t.database.listen('workspace_files', { onNotify: (p) => heard.push(p), onConnect: () => up() });
    await connected;
  });
  afterAll(async () => {
    await listener?.close();
    await fixture?.close();
  });
  const next = async (count: number) => {
    for (let i = 0; i < 100 && heard.length < count; i++) await new Promise((r) => setTimeout(r, 20));
    return heard.splice(0, heard.length).sort();
  };

  it('names the folder of each save, rename and removal, at the top as ""; the other workspaces are told apart by id', async () => {
    await put(files, ws, 'top.txt', 'a');
    expect(await next(1)).toEqual([`${ws} `]);
    await put(files, ws, 'a/b/deep.txt', 'a');
    expect(await next(1)).toEqual([`${ws} a/b`]);
    await files.rename(ws, 'a/b/deep.txt', 'c/moved.txt', null);
    expect(await next(2)).toEqual([`${ws} a/b`, `${ws} c`]);
    await files.remove(ws, 'c/moved.txt', null);
    expect(await next(1)).toEqual([`${ws} c`]);
    // A save that fails (a path under a file) notifies nothing: nothing changed.
    await expect(put(files, ws, 'top.txt/under.txt', 'x')).rejects.toThrow();
    await new Promise((r) => setTimeout(r, 200));
    expect(heard).toEqual([]);
  });

  it("keeps a mount client's time for the mount's listing; the API's object and a later save without one are the platform's", async () => {
    const given = new Date('2023-11-14T22:13:20.000Z');
    const { object } = await put(files, ws, 'timed.txt', 'x', given);
    expect(Object.keys(object)).not.toContain('modified_at');
    expect((await files.statTimed(ws, 'timed.txt')).modified_at).toBe(given.toISOString());
    expect((await files.listFolder(ws, '', 100)).objects.find((o) => o.path === 'timed.txt')?.modified_at).toBe(given.toISOString());
    await put(files, ws, 'timed.txt', 'y');
    const timed = await files.statTimed(ws, 'timed.txt');
    expect(timed.modified_at).toBe(timed.updated_at);
    await next(2);
  });
});

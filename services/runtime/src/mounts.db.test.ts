import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '@codeagent/db';
import { WorkspaceMounts, type LiveMount } from './mounts.js';

async function until(what: string, probe: () => boolean | Promise<boolean>, limitMs = 20_000): Promise<void> {
  const deadline = Date.now() + limitMs;
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error(`${what}: still not so after ${limitMs} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/**
 * The runtime follows the changes of workspace files (LISTEN workspace_files, decision 0221);
 * a notification sent while its listening connection is down is lost, so each (re)connection
 * makes every live mount list all its folders again (decision 0236).
 */
describe(`workspace mounts follow the database (${process.env.CODEAGENT_TEST_DB ?? 'postgres'})`, () => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await createTestDatabase();
  });
  afterAll(async () => {
    await t.drop();
  });

  it('lists a changed folder again when told, and every folder again after the listener reconnects', async () => {
    const mounts = new WorkspaceMounts({
      dataDir: mkdtempSync(join(tmpdir(), 'codeagent-mounts-')),
      davUrl: () => 'http://127.0.0.1:9/',
      tokenKey: Buffer.alloc(32, 1),
      log: pino({ level: 'silent' }),
    });
    const ws = randomUUID();
    const calls: string[] = [];
    // A live mount without rclone: what the mounts ask of it is what is tested.
    const live = {
      dir: '/nowhere',
      refreshFolder: (folder: string) => Promise.resolve(void calls.push(`folder ${folder}`)),
      refreshTree: () => Promise.resolve(void calls.push('tree')),
    } as unknown as LiveMount;
    (mounts as unknown as { live: Map<string, unknown> }).live.set(ws, { mount: live, changed: new Set(), busy: Promise.resolve() });

    const listener = mounts.follow(t.database);
    try {
      await until('listening, with the mount listed again at the connection', () => listener.connected && calls.includes('tree'));
      calls.length = 0;
      await t.database.pool.query("SELECT pg_notify('workspace_files', $1)", [`${ws} data/raw`]);
      await until('the changed folder listed again', () => calls.includes('folder data/raw'));
      expect(calls).toEqual(['folder data/raw']);

      calls.length = 0;
      const killed = await t.database.pool.query<{ n: number }>(
        "SELECT count(pg_terminate_backend(pid))::int AS n FROM pg_stat_activity WHERE datname = current_database() AND query ILIKE 'LISTEN workspace_files%'",
      );
      expect(killed.rows[0]?.n).toBe(1);
      await until('every folder listed again after the reconnection', () => calls.includes('tree'));
      expect(listener.connected).toBe(true);
    } finally {
      await listener.close();
    }
  });
});

import type { Kysely } from 'kysely';
import type { DB } from '@codeagent/db';

/** Runs work for one key after the previous work of that key ended (failed or not); keys are independent. */
export class KeyedLock {
  private readonly tails = new Map<string, Promise<unknown>>();

  run<T>(key: string, work: () => Promise<T>): Promise<T> {
    const previous = this.tails.get(key) ?? Promise.resolve();
    const next = previous.catch(() => undefined).then(work);
    this.tails.set(key, next);
    void next
      .catch(() => undefined)
      .finally(() => {
        if (this.tails.get(key) === next) this.tails.delete(key);
      });
    return next;
  }
}

/** Notebook path → code-agent session, in the database (survives restarts). */
export class SessionMap {
  constructor(private readonly db: Kysely<DB>) {}

  async get(notebookPath: string, upstreamUrl: string): Promise<string | undefined> {
    const row = await this.db.selectFrom('bridge_sessions').select(['session_id', 'upstream_url']).where('notebook_path', '=', notebookPath).executeTakeFirst();
    // A session of another code-agent server means nothing to this one.
    return row && row.upstream_url === upstreamUrl ? row.session_id : undefined;
  }

  async set(notebookPath: string, sessionId: string, upstreamUrl: string): Promise<void> {
    await this.db
      .insertInto('bridge_sessions')
      .values({ notebook_path: notebookPath, session_id: sessionId, upstream_url: upstreamUrl })
      .onConflict((oc) => oc.column('notebook_path').doUpdateSet({ session_id: sessionId, upstream_url: upstreamUrl, last_used_at: new Date() }))
      .execute();
  }

  async touch(notebookPath: string): Promise<void> {
    await this.db.updateTable('bridge_sessions').set({ last_used_at: new Date() }).where('notebook_path', '=', notebookPath).execute();
  }

  async drop(notebookPath: string): Promise<{ session_id: string; upstream_url: string } | undefined> {
    return this.db.deleteFrom('bridge_sessions').where('notebook_path', '=', notebookPath).returning(['session_id', 'upstream_url']).executeTakeFirst();
  }

  async list() {
    const rows = await this.db.selectFrom('bridge_sessions').selectAll().orderBy('last_used_at', 'desc').execute();
    return rows.map((r) => ({ notebook_path: r.notebook_path, session_id: r.session_id, created_at: r.created_at.toISOString(), last_used_at: r.last_used_at.toISOString() }));
  }
}

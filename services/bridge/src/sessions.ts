import type { ExpressionBuilder, Kysely } from 'kysely';
import type { DB } from '@codeagent/db';

/** Whose session: a user, in a workspace when the request came through /jupyter/{ws}/ (docs/contract/spec.md §9.3). */
export interface SessionOwner {
  userId: string;
  workspaceId: string | null;
}

/** The key of one session (and of its lock): user, workspace and notebook path. */
export function sessionKey(owner: SessionOwner, notebookPath: string): string {
  return JSON.stringify([owner.userId, owner.workspaceId, notebookPath]);
}

export interface StoredSession {
  session_id: string;
  upstream_url: string;
}

/**
 * (user, workspace, notebook path) → code-agent session, in the database (survives restarts).
 * Every query is scoped to its owner: nobody reads, reuses or removes another user's session.
 */
export class SessionMap {
  constructor(private readonly db: Kysely<DB>) {}

  private mine(owner: SessionOwner) {
    return (eb: ExpressionBuilder<DB, 'bridge_sessions'>) =>
      eb.and([eb('user_id', '=', owner.userId), owner.workspaceId === null ? eb('workspace_id', 'is', null) : eb('workspace_id', '=', owner.workspaceId)]);
  }

  async get(owner: SessionOwner, notebookPath: string, upstreamUrl: string): Promise<string | undefined> {
    const row = await this.db
      .selectFrom('bridge_sessions')
      .select(['session_id', 'upstream_url'])
      .where(this.mine(owner))
      .where('notebook_path', '=', notebookPath)
      .executeTakeFirst();
    // A session of another code-agent server means nothing to this one.
    return row && row.upstream_url === upstreamUrl ? row.session_id : undefined;
  }

  async set(owner: SessionOwner, notebookPath: string, sessionId: string, upstreamUrl: string): Promise<void> {
    await this.db
      .insertInto('bridge_sessions')
      .values({ user_id: owner.userId, workspace_id: owner.workspaceId, notebook_path: notebookPath, session_id: sessionId, upstream_url: upstreamUrl })
      .onConflict((oc) => {
        // The partial unique index that matches this owner's kind of key.
        const target =
          owner.workspaceId === null
            ? oc.columns(['user_id', 'notebook_path']).where('workspace_id', 'is', null)
            : oc.columns(['user_id', 'workspace_id', 'notebook_path']).where('workspace_id', 'is not', null);
        return target.doUpdateSet({ session_id: sessionId, upstream_url: upstreamUrl, last_used_at: new Date() });
      })
      .execute();
  }

  async touch(owner: SessionOwner, notebookPath: string): Promise<void> {
    await this.db.updateTable('bridge_sessions').set({ last_used_at: new Date() }).where(this.mine(owner)).where('notebook_path', '=', notebookPath).execute();
  }

  async drop(owner: SessionOwner, notebookPath: string): Promise<StoredSession | undefined> {
    return this.db
      .deleteFrom('bridge_sessions')
      .where(this.mine(owner))
      .where('notebook_path', '=', notebookPath)
      .returning(['session_id', 'upstream_url'])
      .executeTakeFirst();
  }

  /**
   * Keeps the owner's `keep` most recently used mappings and removes the rest (returned, so
   * that their upstream sessions can be deleted too): one user cannot pile up sessions without end.
   */
  async evictBeyond(owner: SessionOwner, keep: number): Promise<StoredSession[]> {
    const stale = this.db.selectFrom('bridge_sessions').select('id').where(this.mine(owner)).orderBy('last_used_at', 'desc').orderBy('id', 'desc').offset(keep);
    return this.db.deleteFrom('bridge_sessions').where('id', 'in', stale).returning(['session_id', 'upstream_url']).execute();
  }

  async list(owner: SessionOwner) {
    const rows = await this.db.selectFrom('bridge_sessions').selectAll().where(this.mine(owner)).orderBy('last_used_at', 'desc').orderBy('id').execute();
    return rows.map((r) => ({
      notebook_path: r.notebook_path,
      session_id: r.session_id,
      created_at: r.created_at.toISOString(),
      last_used_at: r.last_used_at.toISOString(),
    }));
  }
}

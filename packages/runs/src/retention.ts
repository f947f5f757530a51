import type { Kysely } from 'kysely';
import type { DB } from '@codeagent/db';

export interface ExpiredRun {
  id: string;
  workspace_id: string;
  log_key: string | null;
  output_path: string | null;
}

/** Up to `limit` finished runs (succeeded, failed, cancelled) that finished before `before`, oldest first. */
export async function expiredRuns(db: Kysely<DB>, before: Date, limit: number): Promise<ExpiredRun[]> {
  return db
    .selectFrom('runs')
    .select(['id', 'workspace_id', 'log_key', 'output_path'])
    .where('status', 'in', ['succeeded', 'failed', 'cancelled'])
    .where('finished_at', '<', before)
    .orderBy('finished_at')
    .limit(limit)
    .execute();
}

/** Deletes these run rows if they are still finished; returns how many went. */
export async function deleteFinishedRuns(db: Kysely<DB>, ids: string[]): Promise<number> {
  if (ids.length === 0) return 0;
  const res = await db.deleteFrom('runs').where('id', 'in', ids).where('status', 'in', ['succeeded', 'failed', 'cancelled']).executeTakeFirst();
  return Number(res.numDeletedRows);
}

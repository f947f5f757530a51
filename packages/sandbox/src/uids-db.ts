import { sql, type Kysely } from 'kysely';
import type { DB } from '@codeagent/db';
import { UID_RANGE, type UidAllocator } from './identity.js';

export class UnknownWorkspaceError extends Error {
  constructor(workspaceId: string) {
    super(`workspace ${workspaceId} does not exist`);
    this.name = 'UnknownWorkspaceError';
  }
}

/**
 * Sandbox uids kept in the database (`sandbox_identities`): allocated once per workspace, the
 * next free slot, and the same on every runtime and after every restart. Only live (not
 * deleted) workspaces get one.
 */
export function databaseUidAllocator(db: Kysely<DB>, base: number): UidAllocator {
  const cache = new Map<string, number>();
  return {
    async uidFor(workspaceId) {
      // Checked every time: a deleted workspace gets no new kernel, even with its uid cached.
      const live = await db.selectFrom('workspaces').select('id').where('id', '=', workspaceId).where('deleted_at', 'is', null).executeTakeFirst();
      if (!live) throw new UnknownWorkspaceError(workspaceId);
      const known = cache.get(workspaceId);
      if (known !== undefined) return base + known;
      for (let attempt = 0; attempt < 20; attempt++) {
        const existing = await db.selectFrom('sandbox_identities').select('slot').where('workspace_id', '=', workspaceId).executeTakeFirst();
        if (existing) {
          if (existing.slot >= UID_RANGE) throw new Error(`the sandbox uid range is exhausted (${UID_RANGE} workspaces); raise SANDBOX_UID_BASE's range`);
          cache.set(workspaceId, existing.slot);
          return base + existing.slot;
        }
        // Two runtimes may race for the same next slot: the loser's insert does nothing and it tries again.
        await db
          .insertInto('sandbox_identities')
          .columns(['workspace_id', 'slot'])
          .expression(
            db
              .selectFrom('sandbox_identities')
              .select([sql<string>`${workspaceId}::uuid`.as('workspace_id'), sql<number>`coalesce(max(slot), 0) + 1`.as('slot')]),
          )
          .onConflict((oc) => oc.doNothing())
          .execute();
      }
      throw new Error(`could not allocate a sandbox uid for workspace ${workspaceId}`);
    },
  };
}

import { sql, type Kysely, type Transaction } from 'kysely';
import { EVERY_USER, isForeignKeyViolation, isUniqueViolation, notifyUserChanged, withRetry, type DB, type MemberRole, type WorkspaceRow } from '@codeagent/db';
import { ConflictError, ForbiddenError, NotFoundError, decodeCursor, keysetPage, isUuid } from '@codeagent/service-kit';
import type { MemberDto, WorkspaceDto } from './schemas.js';

export type { MemberDto, WorkspaceDto };

/** Who performs a change; the self-removal rule needs to know. */
export interface Actor {
  userId: string;
  isSystemAdmin: boolean;
}

function toWorkspaceDto(w: WorkspaceRow & { member_count: number | null }): WorkspaceDto {
  return {
    id: w.id,
    name: w.name,
    description: w.description,
    created_at: w.created_at.toISOString(),
    updated_at: w.updated_at.toISOString(),
    deleted_at: w.deleted_at ? w.deleted_at.toISOString() : null,
    member_count: Number(w.member_count ?? 0),
  };
}

function workspaceQuery(db: Kysely<DB> | Transaction<DB>) {
  return db
    .selectFrom('workspaces as w')
    .selectAll('w')
    .select((eb) =>
      eb
        .selectFrom('workspace_members as m')
        .select(sql<number>`count(*)::int`.as('n'))
        .whereRef('m.workspace_id', '=', 'w.id')
        .where('m.deleted_at', 'is', null)
        .as('member_count'),
    );
}

function notFound(id: string): NotFoundError {
  return new NotFoundError(`workspace ${id} not found`);
}

/**
 * Locks the live workspace row for the rest of the transaction. Every membership change
 * takes this lock first, so the rules that count admins see a stable set of members,
 * on PostgreSQL under concurrency as well as on the single-connection embedded database.
 */
async function lockLiveWorkspace(trx: Transaction<DB>, id: string): Promise<void> {
  if (!isUuid(id)) throw notFound(id);
  const row = await trx.selectFrom('workspaces').select('id').where('id', '=', id).where('deleted_at', 'is', null).forUpdate().executeTakeFirst();
  if (!row) throw notFound(id);
}

/** Transactions of this module: retried as a whole on a serialization failure or deadlock. */
function inTransaction<T>(db: Kysely<DB>, work: (trx: Transaction<DB>) => Promise<T>): Promise<T> {
  return withRetry(() => db.transaction().execute(work));
}

export async function createWorkspace(db: Kysely<DB>, input: { name: string; description?: string | undefined; adminUserId: string }): Promise<WorkspaceDto> {
  return inTransaction(db, async (trx) => {
    const admin = isUuid(input.adminUserId) ? await trx.selectFrom('users').select('id').where('id', '=', input.adminUserId).executeTakeFirst() : undefined;
    if (!admin) throw new NotFoundError(`user ${input.adminUserId} not found`);
    const ws = await trx
      .insertInto('workspaces')
      .values({ name: input.name, description: input.description ?? '' })
      .returning('id')
      .executeTakeFirstOrThrow();
    try {
      await trx.insertInto('workspace_members').values({ workspace_id: ws.id, user_id: admin.id, role: 'admin' }).execute();
      await notifyUserChanged(trx, admin.id);
    } catch (err) {
      // The user was deleted meanwhile.
      if (isForeignKeyViolation(err)) throw new NotFoundError(`user ${input.adminUserId} not found`);
      throw err;
    }
    return toWorkspaceDto(await workspaceQuery(trx).where('w.id', '=', ws.id).executeTakeFirstOrThrow());
  });
}

export async function getWorkspace(db: Kysely<DB>, id: string): Promise<WorkspaceDto> {
  if (!isUuid(id)) throw notFound(id);
  const row = await workspaceQuery(db).where('w.id', '=', id).where('w.deleted_at', 'is', null).executeTakeFirst();
  if (!row) throw notFound(id);
  return toWorkspaceDto(row);
}

export async function listWorkspaces(db: Kysely<DB>, opts: { includeDeleted: boolean; limit: number; cursor?: string | undefined }) {
  const after = decodeCursor(opts.cursor, ['time', 'uuid']);
  let q = workspaceQuery(db)
    .orderBy('w.created_at')
    .orderBy('w.id')
    .limit(opts.limit + 1);
  if (!opts.includeDeleted) q = q.where('w.deleted_at', 'is', null);
  if (after) {
    const [at, id] = after;
    q = q.where((eb) => eb(eb.refTuple('w.created_at', 'w.id'), '>', eb.tuple(at, id)));
  }
  const rows = await q.execute();
  return keysetPage(rows, opts.limit, (w) => [w.created_at.toISOString(), w.id], toWorkspaceDto);
}

export async function updateWorkspace(
  db: Kysely<DB>,
  id: string,
  patch: { name?: string | undefined; description?: string | undefined },
): Promise<WorkspaceDto> {
  return inTransaction(db, async (trx) => {
    await lockLiveWorkspace(trx, id);
    const changes: { name?: string; description?: string } = {};
    if (patch.name !== undefined) changes.name = patch.name;
    if (patch.description !== undefined) changes.description = patch.description;
    if (Object.keys(changes).length > 0) {
      await trx
        .updateTable('workspaces')
        .set({ ...changes, updated_at: new Date() })
        .where('id', '=', id)
        .execute();
      // Its members' cached workspace lists hold the name.
      if (changes.name !== undefined) await notifyUserChanged(trx, EVERY_USER);
    }
    return toWorkspaceDto(await workspaceQuery(trx).where('w.id', '=', id).executeTakeFirstOrThrow());
  });
}

/** Soft-deletes the workspace and all its members in one transaction (docs/contract/seed.md §3 rule 1). */
export async function softDeleteWorkspace(db: Kysely<DB>, id: string): Promise<void> {
  await inTransaction(db, async (trx) => {
    await lockLiveWorkspace(trx, id);
    const now = new Date();
    await trx.updateTable('workspaces').set({ deleted_at: now, updated_at: now }).where('id', '=', id).execute();
    await trx
      .updateTable('workspace_members')
      .set({ deleted_at: now, updated_at: now })
      .where('workspace_id', '=', id)
      .where('deleted_at', 'is', null)
      .execute();
    await notifyUserChanged(trx, EVERY_USER);
  });
}

function memberQuery(db: Kysely<DB> | Transaction<DB>, workspaceId: string) {
  return db
    .selectFrom('workspace_members as m')
    .innerJoin('users as u', 'u.id', 'm.user_id')
    .select(['m.workspace_id', 'm.user_id', 'u.email', 'u.name', 'm.role', 'm.created_at', 'm.updated_at'])
    .where('m.workspace_id', '=', workspaceId)
    .where('m.deleted_at', 'is', null);
}

type MemberJoinRow = Awaited<ReturnType<ReturnType<typeof memberQuery>['executeTakeFirstOrThrow']>>;

function toMemberDto(m: MemberJoinRow): MemberDto {
  return {
    workspace_id: m.workspace_id,
    user_id: m.user_id,
    email: m.email,
    name: m.name,
    role: m.role,
    created_at: m.created_at.toISOString(),
    updated_at: m.updated_at.toISOString(),
  };
}

export async function addMember(db: Kysely<DB>, workspaceId: string, userId: string, role: MemberRole): Promise<MemberDto> {
  return inTransaction(db, async (trx) => {
    await lockLiveWorkspace(trx, workspaceId);
    const user = isUuid(userId) ? await trx.selectFrom('users').select('id').where('id', '=', userId).executeTakeFirst() : undefined;
    if (!user) throw new NotFoundError(`user ${userId} not found`);
    try {
      const inserted = await trx
        .insertInto('workspace_members')
        .values({ workspace_id: workspaceId, user_id: userId, role })
        .onConflict((oc) => oc.columns(['workspace_id', 'user_id']).doNothing())
        .returning('user_id')
        .executeTakeFirst();
      if (!inserted) throw new ConflictError(`user ${userId} is already a member of workspace ${workspaceId}`);
      await notifyUserChanged(trx, user.id);
    } catch (err) {
      if (isUniqueViolation(err)) throw new ConflictError(`user ${userId} is already a member of workspace ${workspaceId}`);
      // The user was deleted meanwhile (DELETE /platform/users/{id} holds their row).
      if (isForeignKeyViolation(err)) throw new NotFoundError(`user ${userId} not found`);
      throw err;
    }
    return toMemberDto(await memberQuery(trx, workspaceId).where('m.user_id', '=', userId).executeTakeFirstOrThrow());
  });
}

export async function listMembers(db: Kysely<DB>, workspaceId: string, limit: number, cursor: string | undefined) {
  await getWorkspace(db, workspaceId);
  const after = decodeCursor(cursor, ['time', 'uuid']);
  let q = memberQuery(db, workspaceId)
    .orderBy('m.created_at')
    .orderBy('m.user_id')
    .limit(limit + 1);
  if (after) {
    const [at, id] = after;
    q = q.where((eb) => eb(eb.refTuple('m.created_at', 'm.user_id'), '>', eb.tuple(at, id)));
  }
  const rows = await q.execute();
  return keysetPage(rows, limit, (m) => [m.created_at.toISOString(), m.user_id], toMemberDto);
}

async function lockedMember(trx: Transaction<DB>, workspaceId: string, userId: string): Promise<MemberJoinRow> {
  await lockLiveWorkspace(trx, workspaceId);
  const member = isUuid(userId) ? await memberQuery(trx, workspaceId).where('m.user_id', '=', userId).executeTakeFirst() : undefined;
  if (!member) throw new NotFoundError(`user ${userId} is not a member of workspace ${workspaceId}`);
  return member;
}

/** docs/contract/seed.md §3 rule 2: a change that would leave the workspace without an admin is refused. */
async function assertAnotherAdminRemains(trx: Transaction<DB>, workspaceId: string): Promise<void> {
  const { n } = await trx
    .selectFrom('workspace_members')
    .select(sql<number>`count(*)::int`.as('n'))
    .where('workspace_id', '=', workspaceId)
    .where('role', '=', 'admin')
    .where('deleted_at', 'is', null)
    .executeTakeFirstOrThrow();
  if (Number(n) <= 1) {
    throw new ConflictError('this is the last admin of the workspace; make another member admin first', 'last_admin');
  }
}

export async function changeMemberRole(db: Kysely<DB>, workspaceId: string, userId: string, role: MemberRole): Promise<MemberDto> {
  return inTransaction(db, async (trx) => {
    const member = await lockedMember(trx, workspaceId, userId);
    if (member.role === 'admin' && role !== 'admin') await assertAnotherAdminRemains(trx, workspaceId);
    if (member.role !== role) {
      await trx
        .updateTable('workspace_members')
        .set({ role, updated_at: new Date() })
        .where('workspace_id', '=', workspaceId)
        .where('user_id', '=', userId)
        .execute();
    }
    // Also when nothing changed: the caller waits for this announcement (app.userChanged).
    await notifyUserChanged(trx, member.user_id);
    return toMemberDto(await memberQuery(trx, workspaceId).where('m.user_id', '=', userId).executeTakeFirstOrThrow());
  });
}

export async function removeMember(db: Kysely<DB>, workspaceId: string, userId: string, actor: Actor): Promise<void> {
  await inTransaction(db, async (trx) => {
    const member = await lockedMember(trx, workspaceId, userId);
    // docs/contract/seed.md §3 rule 3.
    if (actor.isSystemAdmin && actor.userId === member.user_id) {
      throw new ConflictError('a system administrator cannot remove themselves from a workspace', 'self_removal');
    }
    if (member.role === 'admin') await assertAnotherAdminRemains(trx, workspaceId);
    await trx.deleteFrom('workspace_members').where('workspace_id', '=', workspaceId).where('user_id', '=', userId).execute();
    await notifyUserChanged(trx, member.user_id);
  });
}

/** The live workspaces a user belongs to (for /auth/me and the access rule, cached per user: routes/access.ts). */
export async function workspacesOfUser(db: Kysely<DB>, userId: string) {
  return db
    .selectFrom('workspace_members as m')
    .innerJoin('workspaces as w', 'w.id', 'm.workspace_id')
    .select(['w.id', 'w.name', 'm.role'])
    .where('m.user_id', '=', userId)
    .where('m.deleted_at', 'is', null)
    .where('w.deleted_at', 'is', null)
    .orderBy('w.name')
    .execute();
}

export type WorkspaceAccess = 'read' | 'write';

/**
 * A workspace mount token (decision 0140) opens its own workspace, as an editor, while that
 * workspace exists: any other workspace, or a deleted one, is the 404 a non-member gets.
 */
export async function requireMountAccess(db: Kysely<DB>, workspaceId: string, tokenWorkspace: string): Promise<void> {
  const ws = workspaceId.toLowerCase();
  if (ws !== tokenWorkspace || !isUuid(ws)) throw notFound(workspaceId);
  const row = await db.selectFrom('workspaces').select('id').where('id', '=', ws).where('deleted_at', 'is', null).executeTakeFirst();
  if (!row) throw notFound(workspaceId);
}

/** A user's live workspaces and roles (`workspacesOfUser`), as the access rule reads them. */
export type UserWorkspaces = readonly { id: string; name: string; role: MemberRole }[];

/**
 * The membership rule of the workspace routes (docs/contract/spec.md §4.3, §4.4) on the user's
 * live workspaces: a non-member, or a workspace that does not exist or was deleted, is 404 (no
 * existence leak); a `viewer` may only read (403 on writes). Returns the caller's role.
 */
export function roleIn(workspaces: UserWorkspaces, workspaceId: string, access: WorkspaceAccess): MemberRole {
  // (The ids are PostgreSQL's text of a uuid: lower case; a request may write them in either.)
  const id = workspaceId.toLowerCase();
  const member = isUuid(id) ? workspaces.find((w) => w.id === id) : undefined;
  if (!member) throw notFound(workspaceId);
  if (access === 'write' && member.role === 'viewer') {
    throw new ForbiddenError('viewers of this workspace may read only; ask a workspace admin for the editor role');
  }
  return member.role;
}

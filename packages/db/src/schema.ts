import type { ColumnType, Generated, Insertable, Selectable, Updateable } from 'kysely';

type Timestamp = ColumnType<Date, Date | string | undefined, Date | string>;
type CreatedAt = ColumnType<Date, Date | string | undefined, never>;

export interface PlatformRolesTable {
  id: string;
  name: string;
  description: Generated<string>;
}

export interface UsersTable {
  id: Generated<string>;
  email: string;
  name: string;
  password_hash: string;
  platform_role_id: string;
  created_at: CreatedAt;
  updated_at: Timestamp;
}

export interface RevokedTokensTable {
  jti: string;
  expires_at: Timestamp;
}

export interface WorkspacesTable {
  id: Generated<string>;
  name: string;
  description: Generated<string>;
  created_at: CreatedAt;
  updated_at: Timestamp;
  deleted_at: ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;
}

export type MemberRole = 'admin' | 'editor' | 'viewer';

export interface WorkspaceMembersTable {
  workspace_id: string;
  user_id: string;
  role: MemberRole;
  created_at: CreatedAt;
  updated_at: Timestamp;
  deleted_at: ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;
}

export interface SchemaMigrationsTable {
  version: string;
  applied_at: CreatedAt;
}

/** The database as Kysely sees it. Later migrations add their tables here. */
export interface DB {
  platform_roles: PlatformRolesTable;
  users: UsersTable;
  revoked_tokens: RevokedTokensTable;
  workspaces: WorkspacesTable;
  workspace_members: WorkspaceMembersTable;
  schema_migrations: SchemaMigrationsTable;
}

export type UserRow = Selectable<UsersTable>;
export type NewUser = Insertable<UsersTable>;
export type WorkspaceRow = Selectable<WorkspacesTable>;
export type WorkspaceUpdate = Updateable<WorkspacesTable>;
export type MemberRow = Selectable<WorkspaceMembersTable>;

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
  /** Set while the user is disabled: no login, no token accepted (docs/contract/spec.md §4.5). */
  disabled_at: ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;
  /** Tokens issued before this instant are refused (all sessions revoked at once). */
  tokens_valid_after: ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;
  /** The one token exempt from `tokens_valid_after`: the session that changed its own password. */
  kept_token_jti: ColumnType<string | null, string | null | undefined, string | null>;
}

export interface RevokedTokensTable {
  jti: string;
  expires_at: Timestamp;
}

export interface LoginThrottleTable {
  key: string;
  failures: number;
  last_failure_at: Timestamp;
  locked_until: ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;
}

/** An address an account logged in from (migration 020, decision 0255); keys as login_throttle's. */
export interface LoginKnownAddressesTable {
  account: string;
  address: string;
  last_login_at: Timestamp;
}

/** Lab tickets already exchanged for a pass (decision 0263). */
export interface LabTicketsUsedTable {
  id: string;
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

export type RunStatus = 'queued' | 'running' | 'succeeded' | 'failed' | 'cancelled';
type Nullable<T> = ColumnType<T | null, T | null | undefined, T | null>;
type NullableTime = ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;

export interface SchedulesTable {
  id: Generated<string>;
  workspace_id: string;
  notebook_path: string;
  cron: string;
  timezone: Generated<string>;
  enabled: Generated<boolean>;
  next_run_at: NullableTime;
  last_run_at: NullableTime;
  created_by: Nullable<string>;
  created_at: CreatedAt;
  updated_at: Timestamp;
}

export interface RunsTable {
  id: Generated<string>;
  workspace_id: string;
  schedule_id: Nullable<string>;
  notebook_path: string;
  parameters: ColumnType<Record<string, unknown>, string | undefined, string>;
  status: ColumnType<RunStatus, RunStatus | undefined, RunStatus>;
  error: Nullable<string>;
  log_key: Nullable<string>;
  output_path: Nullable<string>;
  created_by: Nullable<string>;
  created_at: CreatedAt;
  started_at: NullableTime;
  finished_at: NullableTime;
  worker_id: Nullable<string>;
  lease_expires_at: NullableTime;
}

export interface ObjectsTable {
  workspace_id: string;
  path: string;
  version_id: string;
  size: number;
  sha256: string;
  content_type: string;
  updated_at: Timestamp;
  updated_by: Nullable<string>;
  /** The mount client's own time of the file (decision 0220); NULL: updated_at. */
  modified_at: NullableTime;
}

export interface ObjectVersionsTable {
  id: string;
  workspace_id: string;
  path: string;
  size: number;
  sha256: string;
  content_type: string;
  created_at: ColumnType<Date, Date | string, Date | string>;
  created_by: Nullable<string>;
  replaced_at: Timestamp;
}

export interface TrashItemsTable {
  id: Generated<string>;
  workspace_id: string;
  path: string;
  version_id: string;
  size: number;
  sha256: string;
  content_type: string;
  updated_at: ColumnType<Date, Date | string, Date | string>;
  updated_by: Nullable<string>;
  deleted_at: Timestamp;
  deleted_by: Nullable<string>;
}

export interface ClustersTable {
  id: Generated<string>;
  name: string;
  base_url: string;
  auth_type: 'none' | 'simple' | 'basic';
  username: Nullable<string>;
  password_enc: Nullable<string>;
  rate_limit: number;
  description: Nullable<string>;
  created_at: CreatedAt;
  updated_at: Timestamp;
}

export interface AuditEntriesTable {
  id: Generated<string>;
  occurred_at: ColumnType<Date, Date | string | undefined, never>;
  actor: string;
  action: string;
  target_type: string;
  target_id: string;
  details: ColumnType<Record<string, unknown>, string, never>;
}

export interface BridgeSessionsTable {
  id: Generated<string>;
  user_id: string;
  /** Set when the request came through /jupyter/{ws}/; null otherwise. */
  workspace_id: string | null;
  notebook_path: string;
  session_id: string;
  upstream_url: string;
  created_at: CreatedAt;
  last_used_at: Timestamp;
}

/** One token bucket per cluster for /mcp rate limits, shared by every cluster service (migration 010). */
export interface ClusterRateBucketsTable {
  cluster_id: string;
  tokens: number;
  rate: number;
  updated_at: Timestamp;
}

/** A named lease held by one instance until it releases it or it expires (migration 010). */
export interface ServiceLeasesTable {
  key: string;
  holder: string;
  expires_at: Timestamp;
}

/** The database as Kysely sees it. Later migrations add their tables here. */
/** A workspace's sandbox uid is SANDBOX_UID_BASE + slot (migration 009). */
export interface SandboxIdentitiesTable {
  workspace_id: string;
  slot: number;
  created_at: CreatedAt;
}

/**
 * The running totals of the bytes each workspace stores (migration 012, decision 0200): a
 * workspace's total is the sum of its rows. Appended by triggers, folded by `foldUsage`.
 */
export interface WorkspaceUsageTable {
  id: Generated<number>;
  workspace_id: string;
  bytes: number;
}

/** A user's JupyterLab settings of one plugin, as JSON5 text (migration 019, decision 0252). */
export interface LabSettingsTable {
  user_id: string;
  plugin_id: string;
  raw: string;
  created_at: CreatedAt;
  updated_at: Timestamp;
}

/** A user's JupyterLab layout (a "workspace" in JupyterLab's words), as JSON text (migration 019). */
export interface LabLayoutsTable {
  user_id: string;
  name: string;
  layout: string;
  created_at: CreatedAt;
  updated_at: Timestamp;
}

export interface DB {
  platform_roles: PlatformRolesTable;
  users: UsersTable;
  revoked_tokens: RevokedTokensTable;
  login_throttle: LoginThrottleTable;
  login_known_addresses: LoginKnownAddressesTable;
  lab_tickets_used: LabTicketsUsedTable;
  workspaces: WorkspacesTable;
  workspace_members: WorkspaceMembersTable;
  schema_migrations: SchemaMigrationsTable;
  schedules: SchedulesTable;
  runs: RunsTable;
  objects: ObjectsTable;
  object_versions: ObjectVersionsTable;
  trash_items: TrashItemsTable;
  clusters: ClustersTable;
  audit_entries: AuditEntriesTable;
  bridge_sessions: BridgeSessionsTable;
  sandbox_identities: SandboxIdentitiesTable;
  cluster_rate_buckets: ClusterRateBucketsTable;
  service_leases: ServiceLeasesTable;
  workspace_usage: WorkspaceUsageTable;
  lab_settings: LabSettingsTable;
  lab_layouts: LabLayoutsTable;
}

export type UserRow = Selectable<UsersTable>;
export type NewUser = Insertable<UsersTable>;
export type WorkspaceRow = Selectable<WorkspacesTable>;
export type WorkspaceUpdate = Updateable<WorkspacesTable>;
export type MemberRow = Selectable<WorkspaceMembersTable>;
export type ScheduleRow = Selectable<SchedulesTable>;
export type RunRow = Selectable<RunsTable>;
export type ObjectRow = Selectable<ObjectsTable>;
export type ObjectVersionRow = Selectable<ObjectVersionsTable>;
export type TrashItemRow = Selectable<TrashItemsTable>;
export type ClusterRow = Selectable<ClustersTable>;
export type AuditEntryRow = Selectable<AuditEntriesTable>;

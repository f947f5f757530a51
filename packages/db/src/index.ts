export {
  openDatabase,
  openPlatformDatabase,
  platformConnection,
  describeConnection,
  embeddedMaxConnections,
  DatabaseUnavailableError,
  DATABASE_POOL_SIZES,
} from './open.js';
export { listenOn, WORKSPACE_FILES_CHANNEL, workspaceFilesChange } from './notify.js';
export type { ListenHandlers, Listener } from './notify.js';
export type { Database, OpenOptions, Connection, ScriptSession, DatabaseClient } from './open.js';
export { migrate, listMigrations } from './migrate.js';
export { EmbeddedPostgres, DB_OS_USER } from './embedded/server.js';
export type { EmbeddedPostgresOptions } from './embedded/server.js';
export { EmbeddedDatabaseError } from './embedded/binaries.js';
export { EMBEDDED, embeddedPaths, embeddedConnection } from './embedded/layout.js';
export type { EmbeddedPaths } from './embedded/layout.js';
export { createTestDatabase, testDatabaseTargets, testServerUrl } from './testing.js';
export type { TestDatabase, TestDatabaseTarget } from './testing.js';
export { isForeignKeyViolation, isSerializationFailure, isUniqueViolation, withRetry } from './errors.js';
export { advisoryXactLock, tryLease, releaseLease, withLease, LeaseBusyError } from './locks.js';
export type { LeaseOptions } from './locks.js';
export type { DB } from './schema.js';
export * from './schema.js';
export { findActiveTokenUser, tokenIssuedAt, isSystemAdmin, ADMIN_ROLE_ID, USERS_CHANNEL, EVERY_USER, announcedUserId, notifyUserChanged } from './users.js';
export type { TokenIdentity } from './users.js';

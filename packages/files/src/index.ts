export { WorkspaceFiles, storedBytes, foldUsage, FOLDER_COUNT_LIMIT } from './files.js';
export type { OpenedObject, TimedObject, WorkspaceFilesOptions } from './files.js';
export {
  ObjectSchema,
  VersionSchema,
  TrashItemSchema,
  FolderSchema,
  ListedFolderSchema,
  type ObjectDto,
  type ListedFolderDto,
  type VersionDto,
  type TrashItemDto,
  type FolderDto,
} from './schemas.js';
export { entityTag, noneMatchHits, writeConditionsOf, checkWriteConditions } from './conditions.js';
export type { WriteConditions } from './conditions.js';

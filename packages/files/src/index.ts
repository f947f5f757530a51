export { WorkspaceFiles, storedBytes } from './files.js';
export type { OpenedObject, WorkspaceFilesOptions } from './files.js';
export { ObjectSchema, VersionSchema, TrashItemSchema, FolderSchema, type ObjectDto, type VersionDto, type TrashItemDto, type FolderDto } from './schemas.js';

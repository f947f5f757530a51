export { WorkspaceFiles, storedBytes } from './files.js';
export type { ObjectDto, VersionDto, TrashItemDto, OpenedObject, FolderDto, WorkspaceFilesOptions } from './files.js';

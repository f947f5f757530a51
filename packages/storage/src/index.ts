export { validateObjectPath, validatePrefix, InvalidPathError, MAX_PATH_BYTES } from './paths.js';
export { AREAS, isArea, ObjectTooLargeError } from './store.js';
export type { Area, ObjectStore, PutOptions, PutResult, GetResult, ObjectInfo, ByteRange, ListPage } from './store.js';
export { LocalObjectStore } from './local.js';
export { S3ObjectStore } from './s3.js';
export type { S3StoreOptions } from './s3.js';
export { createObjectStore } from './factory.js';
export { WorkspaceFiles } from './files.js';
export type { ObjectDto, VersionDto, TrashItemDto, OpenedObject } from './files.js';

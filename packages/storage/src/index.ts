export { validateObjectPath, validateNewObjectPath, validatePrefix, bidiControlIn, invisibleCharacterIn, InvalidPathError, MAX_PATH_BYTES } from './paths.js';
export { AREAS, isArea, ObjectTooLargeError } from './store.js';
export type { Area, ObjectStore, PutOptions, PutResult, GetResult, ObjectInfo, ByteRange, ListPage } from './store.js';
export { LocalObjectStore } from './local.js';
// The S3 store itself is loaded by createObjectStore when STORAGE_BACKEND=s3 (not here: the SDK is heavy).
export type { S3ObjectStore, S3StoreOptions } from './s3.js';
export { StorageUnavailableError, s3StartError } from './s3-errors.js';
export { createObjectStore } from './factory.js';
export { normalizeContentType, mediaTypeOf, typeFromExtension } from './content-type.js';

/**
 * The content type stored with an object (docs/contract/spec.md §4.3, §4.5). A client's declared type is never
 * kept as sent: it is parsed, lower-cased and stripped of every parameter except `charset` on
 * `text/*`; a missing, malformed or meaningless one (`application/octet-stream`, or a form
 * type on a raw upload) is replaced by the type the file extension names.
 */

const EXTENSION_TYPES: Record<string, string> = {
  ipynb: 'application/x-ipynb+json',
  json: 'application/json',
  csv: 'text/csv',
  tsv: 'text/tab-separated-values',
  txt: 'text/plain',
  log: 'text/plain',
  md: 'text/markdown',
  py: 'text/x-python',
  r: 'text/x-r',
  sql: 'application/sql',
  yaml: 'application/yaml',
  yml: 'application/yaml',
  toml: 'application/toml',
  html: 'text/html',
  htm: 'text/html',
  xml: 'application/xml',
  svg: 'image/svg+xml',
  js: 'text/javascript',
  mjs: 'text/javascript',
  css: 'text/css',
  png: 'image/png',
  jpg: 'image/jpeg',
  jpeg: 'image/jpeg',
  gif: 'image/gif',
  webp: 'image/webp',
  pdf: 'application/pdf',
  parquet: 'application/vnd.apache.parquet',
  avro: 'application/avro',
  zip: 'application/zip',
  gz: 'application/gzip',
  tar: 'application/x-tar',
};

const FALLBACK = 'application/octet-stream';

/** Declared types that say nothing about the content of a raw upload. */
const MEANINGLESS = new Set([FALLBACK, 'application/x-www-form-urlencoded', 'multipart/form-data', 'binary/octet-stream']);

// RFC 9110 token characters, type "/" subtype.
const MEDIA_TYPE = /^[a-z0-9!#$&^_.+-]{1,64}\/[a-z0-9!#$&^_.+-]{1,127}$/;
const CHARSET = /^[a-z0-9!#$%&'+^_`{}~-]{1,40}$/;

/** The type the file extension of `path` names, or application/octet-stream. */
export function typeFromExtension(path: string): string {
  const ext = /\.([A-Za-z0-9]+)$/.exec(path)?.[1]?.toLowerCase();
  return (ext && EXTENSION_TYPES[ext]) ?? FALLBACK;
}

/** `type/subtype` of a Content-Type value, lower-cased, or undefined when malformed. */
export function mediaTypeOf(value: string | undefined): string | undefined {
  const type = value?.split(';', 1)[0]?.trim().toLowerCase();
  return type !== undefined && MEDIA_TYPE.test(type) ? type : undefined;
}

function charsetOf(value: string): string | undefined {
  for (const param of value.split(';').slice(1)) {
    const eq = param.indexOf('=');
    if (eq === -1 || param.slice(0, eq).trim().toLowerCase() !== 'charset') continue;
    const charset = param
      .slice(eq + 1)
      .trim()
      .replace(/^"(.*)"$/, '$1')
      .toLowerCase();
    return CHARSET.test(charset) ? charset : undefined;
  }
  return undefined;
}

/** The content type to store for an upload to `path` that declared `declared`. */
export function normalizeContentType(path: string, declared: string | undefined): string {
  const type = mediaTypeOf(declared);
  if (type === undefined || MEANINGLESS.has(type) || type.startsWith('multipart/')) return typeFromExtension(path);
  const charset = type.startsWith('text/') ? charsetOf(declared!) : undefined;
  return charset ? `${type}; charset=${charset}` : type;
}

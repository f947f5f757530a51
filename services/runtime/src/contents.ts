import { createHash } from 'node:crypto';
import { ServerConnection } from '@jupyterlab/services';

/** A file going into or coming out of a sandbox (content base64-encoded in JSON). */
export interface SandboxFile {
  path: string;
  content_base64: string;
}

export interface CollectedFile extends SandboxFile {
  size: number;
  sha256: string;
}

export class FilesLimitError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'FilesLimitError';
  }
}

/** The sandbox could not take the files (its disk is full, its server failed): 507. */
/**
 * The caller asked to send the workspace's files only if they are needed (`files_on_request`),
 * and they are: this workspace's server does not mount its files, so a run works on a copy.
 */
export class FilesRequiredError extends Error {
  constructor() {
    super("this runtime copies the workspace's files into each run (its servers do not mount them): send them as `files`");
    this.name = 'FilesRequiredError';
  }
}

export class SandboxFilesError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SandboxFilesError';
  }
}

export const MAX_FILES = 10_000;
const MAX_DEPTH = 32;

/** Relative, `/`-separated, no `.`/`..`/empty segments, no NUL: the same shape as workspace paths. */
export function isSafeRelativePath(path: string): boolean {
  if (path.length === 0 || path.length > 1024 || path.includes('\0') || path.startsWith('/')) return false;
  return path.split('/').every((s) => s !== '' && s !== '.' && s !== '..');
}

const encodePath = (path: string) => path.split('/').map(encodeURIComponent).join('/');

interface ContentsModel {
  name: string;
  path: string;
  type: 'file' | 'directory' | 'notebook';
  size?: number | null;
  last_modified?: string;
  content?: unknown;
  format?: string | null;
}

/** The Jupyter server's contents API (inside the sandbox: every path resolves within it). */
export class Contents {
  constructor(private readonly settings: ServerConnection.ISettings) {}

  private async call(method: string, path: string, query: string, body?: unknown): Promise<ContentsModel | undefined> {
    const url = `${this.settings.baseUrl}api/contents/${encodePath(path)}${query}`;
    const res = await ServerConnection.makeRequest(url, { method, ...(body === undefined ? {} : { body: JSON.stringify(body) }) }, this.settings);
    const text = await res.text();
    if (res.status === 404) return undefined;
    if (!res.ok) {
      let reason = text.slice(0, 300);
      try {
        reason = String((JSON.parse(text) as { message?: string }).message ?? reason).slice(0, 300);
      } catch {
        // not JSON
      }
      throw new Error(`the Jupyter server answered ${res.status} to ${method} ${path}: ${reason}`);
    }
    return text ? (JSON.parse(text) as ContentsModel) : undefined;
  }

  async mkdirs(dir: string, made: Set<string>): Promise<void> {
    const parts = dir.split('/');
    for (let i = 1; i <= parts.length; i++) {
      const p = parts.slice(0, i).join('/');
      if (made.has(p)) continue;
      await this.call('PUT', p, '', { type: 'directory' });
      made.add(p);
    }
  }

  /**
   * Writes the files below `dir`; returns what the server then reports (size, mtime) per path,
   * so that a later `changedFiles` fetches only what the run touched.
   */
  async upload(dir: string, files: SandboxFile[]): Promise<Map<string, string>> {
    const made = new Set<string>();
    await this.mkdirs(dir, made);
    const stamps = new Map<string, string>();
    for (const f of files) {
      if (!isSafeRelativePath(f.path)) throw new FilesLimitError(`invalid file path ${JSON.stringify(f.path)}`);
      const slash = f.path.lastIndexOf('/');
      if (slash > 0) await this.mkdirs(`${dir}/${f.path.slice(0, slash)}`, made);
      const model = await this.call('PUT', `${dir}/${f.path}`, '', { type: 'file', format: 'base64', content: f.content_base64 });
      stamps.set(f.path, `${model?.size}:${model?.last_modified}`);
    }
    return stamps;
  }

  /**
   * Files below `dir` that are new or differ from `before` (by size and mtime, then by hash),
   * skipping hidden names (checkpoints, caches) and `skip`; at most `maxBytes` together.
   */
  async changedFiles(
    dir: string,
    before: Map<string, string>,
    hashes: Map<string, string>,
    maxBytes: number,
    skip: (path: string) => boolean,
  ): Promise<CollectedFile[]> {
    const out: CollectedFile[] = [];
    let total = 0;
    let seen = 0;
    const walk = async (rel: string, depth: number): Promise<void> => {
      if (depth > MAX_DEPTH) return;
      const listing = await this.call('GET', rel === '' ? dir : `${dir}/${rel}`, '?content=1');
      if (!listing || !Array.isArray(listing.content)) return;
      for (const entry of listing.content as ContentsModel[]) {
        if (entry.name.startsWith('.') || entry.name === '__pycache__') continue;
        if (++seen > MAX_FILES) throw new FilesLimitError(`the run left more than ${MAX_FILES} files`);
        const path = rel === '' ? entry.name : `${rel}/${entry.name}`;
        if (entry.type === 'directory') {
          await walk(path, depth + 1);
          continue;
        }
        if (skip(path) || before.get(path) === `${entry.size}:${entry.last_modified}`) continue;
        if ((entry.size ?? 0) + total > maxBytes)
          throw new FilesLimitError(
            `the run wrote more than ${Math.round(maxBytes / 1024 / 1024)} MiB of files (SANDBOX_FILES_MAX_BYTES); none of them was kept`,
          );
        const file = await this.call('GET', `${dir}/${path}`, '?content=1&type=file&format=base64');
        if (!file || typeof file.content !== 'string') continue;
        const bytes = Buffer.from(file.content, 'base64');
        total += bytes.length;
        if (total > maxBytes)
          throw new FilesLimitError(
            `the run wrote more than ${Math.round(maxBytes / 1024 / 1024)} MiB of files (SANDBOX_FILES_MAX_BYTES); none of them was kept`,
          );
        const sha256 = createHash('sha256').update(bytes).digest('hex');
        if (hashes.get(path) === sha256) continue;
        out.push({ path, content_base64: file.content, size: bytes.length, sha256 });
      }
    };
    await walk('', 0);
    return out;
  }

  async remove(path: string): Promise<void> {
    await this.call('DELETE', path, '');
  }
}

import type { Dispatcher } from 'undici';
import { INTERNAL_TOKEN_HEADER } from '@codeagent/auth';

/** A workspace file going into a run's sandbox, or one the run created or changed. */
export interface RuntimeFile {
  path: string;
  content: Buffer;
}

/** Which workspace a run belongs to, and its files (the runtime runs it in that workspace's sandbox). */
export interface RuntimeRunContext {
  workspaceId: string;
  notebookPath: string;
  files?: RuntimeFile[] | undefined;
  /**
   * Instead of `files`: reads them only if the runtime needs them. A runtime that mounts the
   * workspace's files runs on them in place; one that copies them answers 409 `files_required`
   * and the call is made again with what this returns (decision 0141).
   */
  loadFiles?: (() => Promise<RuntimeFile[] | undefined>) | undefined;
}

/** What `run_notebook` answers; `N` is the caller's notebook type (the runtime sends back the executed notebook). */
export interface RuntimeRunResult<N> {
  status: 'ok' | 'error';
  notebook: N;
  duration_ms: number;
  files?: RuntimeFile[];
  files_error?: string;
  /** How many files were copied into the run (none when the runtime mounts the workspace). */
  files_sent?: number;
}

export interface RuntimeClient<N> {
  /** Executes the notebook in its workspace's sandbox; `signal` aborts the call (the runtime then stops the kernel). */
  runNotebook(notebook: N, timeoutSeconds: number, context?: RuntimeRunContext, signal?: AbortSignal, requestId?: string): Promise<RuntimeRunResult<N>>;
  /** The health probe: `list_kernels` with the token answers 2xx within `timeoutMs`. */
  ping(requestId?: string, timeoutMs?: number): Promise<boolean>;
  /** `warm_up`: the workspace's next run will find a warm kernel; true when the runtime took it on (it answers at once). */
  warmUp(workspaceId: string, requestId?: string, timeoutMs?: number): Promise<boolean>;
}

/** Error text of a failed internal call, with the server's own message when it sent one. */
async function failure(what: string, statusCode: number, body: { text(): Promise<string> }): Promise<Error> {
  const text = await body.text().catch(() => '');
  let message = text.slice(0, 500);
  try {
    const parsed = JSON.parse(text) as { error?: string; message?: string };
    message = [parsed.error, parsed.message].filter(Boolean).join(': ');
  } catch {
    // not JSON
  }
  return new Error(`${what} answered ${statusCode}${message ? `: ${message}` : ''}`);
}

/**
 * undici's `request` (per-call header and body timeouts, which the global `fetch` lacks: a run may
 * take hours), loaded on first use so that importing this package (the backend does, for its probe)
 * does not load undici's hundred modules.
 */
async function request(url: string | URL, options: { dispatcher?: Dispatcher } & Omit<Dispatcher.RequestOptions, 'origin' | 'path'>) {
  return (await import('undici')).request(url, options);
}

const jsonHeaders = (token: string, requestId: string | undefined) => ({
  'content-type': 'application/json',
  [INTERNAL_TOKEN_HEADER]: token,
  ...(requestId ? { 'x-request-id': requestId } : {}),
});

/**
 * The one client of the runtime's action endpoint (docs/contract/spec.md §5.2), with the internal token on every
 * call: `run_notebook` in the run's workspace sandbox, with the workspace's files copied in and
 * the files the run wrote back (the worker), `list_kernels` as a probe (the backend's health), and
 * `warm_up` when a member opens the run form (the backend, decision 0209).
 */
export function runtimeClient<N = unknown>(runtimeUrl: string, token: string): RuntimeClient<N> {
  return {
    async ping(requestId, timeoutMs = 1500) {
      const res = await fetch(`${runtimeUrl}/api/v1/jupyter`, {
        method: 'POST',
        headers: jsonHeaders(token, requestId),
        body: JSON.stringify({ action: 'list_kernels' }),
        signal: AbortSignal.timeout(timeoutMs),
      });
      await res.body?.cancel();
      return res.ok;
    },
    async warmUp(workspaceId, requestId, timeoutMs = 2000) {
      const res = await fetch(`${runtimeUrl}/api/v1/jupyter`, {
        method: 'POST',
        headers: jsonHeaders(token, requestId),
        body: JSON.stringify({ action: 'warm_up', workspace_id: workspaceId }),
        signal: AbortSignal.timeout(timeoutMs),
      });
      if (!res.ok) throw await failure('the runtime', res.status, res);
      return ((await res.json()) as { warming?: boolean }).warming === true;
    },
    async runNotebook(notebook, timeoutSeconds, context, signal, requestId) {
      if (context?.files === undefined && context?.loadFiles) {
        // Files only if needed: a runtime that mounts the workspace runs at once.
        const first = await send(undefined, true);
        if (first.statusCode !== 409) return { ...(await answer<N>(first)), files_sent: 0 };
        const refusal = await first.body.text();
        if (errorCode(refusal) !== 'files_required') throw await failure('the runtime', 409, { text: () => Promise.resolve(refusal) });
        const files = await context.loadFiles();
        return { ...(await answer<N>(await send(files, false))), files_sent: files?.length ?? 0 };
      }
      return { ...(await answer<N>(await send(context?.files, false))), ...(context?.files ? { files_sent: context.files.length } : {}) };

      function send(files: RuntimeFile[] | undefined, filesOnRequest: boolean) {
        return request(`${runtimeUrl}/api/v1/jupyter`, {
          method: 'POST',
          headers: jsonHeaders(token, requestId),
          body: JSON.stringify({
            action: 'run_notebook',
            notebook,
            timeout_seconds: timeoutSeconds,
            ...(context
              ? {
                  workspace_id: context.workspaceId,
                  notebook_path: context.notebookPath,
                  ...(files ? { files: files.map((f) => ({ path: f.path, content_base64: f.content.toString('base64') })) } : {}),
                  ...(filesOnRequest ? { files_on_request: true } : {}),
                }
              : {}),
          }),
          // The runtime answers within the timeout plus its grace (RUN_GRACE_SECONDS, 60 s: ending
          // the kernel, uploading the run's files, or force-stopping a server stuck on its mount);
          // give it a margin beyond that, so the runtime's own answer (which says why) comes first.
          headersTimeout: (timeoutSeconds + 90) * 1000,
          bodyTimeout: (timeoutSeconds + 90) * 1000,
          // Aborting closes the connection; the runtime then stops the notebook's kernel.
          ...(signal ? { signal } : {}),
        });
      }
    },
  };
}

/** The `error` of a JSON error body, if it is one. */
function errorCode(text: string): string | undefined {
  try {
    return (JSON.parse(text) as { error?: string }).error;
  } catch {
    return undefined;
  }
}

/** The body of a `run_notebook` answer, or the error it was. */
async function answer<N>(res: Dispatcher.ResponseData): Promise<RuntimeRunResult<N>> {
  if (res.statusCode !== 200) throw await failure('the runtime', res.statusCode, res.body);
  const body = (await res.body.json()) as {
    status: 'ok' | 'error';
    notebook: N;
    duration_ms: number;
    files?: { path: string; content_base64: string }[];
    files_error?: string;
  };
  const files: RuntimeFile[] | undefined = body.files?.map((f) => ({ path: f.path, content: Buffer.from(f.content_base64, 'base64') }));
  return {
    status: body.status,
    notebook: body.notebook,
    duration_ms: body.duration_ms,
    ...(files ? { files } : {}),
    ...(body.files_error ? { files_error: body.files_error } : {}),
  };
}

/** The connection failed: that backend is down or going; another may take the write. */
const UNREACHABLE = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'EHOSTUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  'UND_ERR_SOCKET',
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_CLOSED',
]);
let nextBackend = 0;

/**
 * `POST /internal/v1/objects` of the backend (docs/contract/spec.md §5.1): how the worker writes run logs. With
 * several backends (BACKEND_URL lists them) it starts at the next one each time and goes on to
 * the others when one cannot be reached: the write is the same bytes to the same key, so
 * sending it again is safe.
 */
export async function putInternalObject(
  backendUrls: string | readonly string[],
  token: string,
  area: string,
  key: string,
  content: Buffer,
  requestId?: string,
): Promise<void> {
  const urls = [backendUrls].flat();
  const first = nextBackend++ % urls.length;
  let lastError: unknown;
  for (let i = 0; i < urls.length; i++) {
    const url = new URL('/internal/v1/objects', urls[(first + i) % urls.length]);
    url.searchParams.set('area', area);
    url.searchParams.set('key', key);
    let res;
    try {
      res = await request(url, {
        method: 'POST',
        headers: { 'content-type': 'application/octet-stream', [INTERNAL_TOKEN_HEADER]: token, ...(requestId ? { 'x-request-id': requestId } : {}) },
        body: content,
      });
    } catch (err) {
      const code = String((err as NodeJS.ErrnoException).code ?? '');
      if (!UNREACHABLE.has(code)) throw err;
      lastError = err;
      continue;
    }
    if (res.statusCode !== 201) throw await failure('POST /internal/v1/objects', res.statusCode, res.body);
    await res.body.dump();
    return;
  }
  throw lastError;
}

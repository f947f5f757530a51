import { request } from 'undici';
import type { Notebook } from './notebook.js';
import type { NotebookRunner } from './worker.js';

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

/** The runtime's `run_notebook` action (SPEC §5.2), with the internal token on every call. */
export function runtimeClient(runtimeUrl: string, token: string): NotebookRunner {
  return {
    async runNotebook(notebook: Notebook, timeoutSeconds: number) {
      const res = await request(`${runtimeUrl}/api/v1/jupyter`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-internal-service-token': token },
        body: JSON.stringify({ action: 'run_notebook', notebook, timeout_seconds: timeoutSeconds }),
        // The runtime bounds the notebook itself; give it a margin to answer.
        headersTimeout: (timeoutSeconds + 60) * 1000,
        bodyTimeout: (timeoutSeconds + 60) * 1000,
      });
      if (res.statusCode !== 200) throw await failure('the runtime', res.statusCode, res.body);
      return (await res.body.json()) as { status: 'ok' | 'error'; notebook: Notebook; duration_ms: number };
    },
  };
}

/** `POST /internal/v1/objects` of the backend (SPEC §5.1): how the worker writes run logs. */
export async function putInternalObject(backendUrl: string, token: string, area: string, key: string, content: Buffer): Promise<void> {
  const url = new URL('/internal/v1/objects', backendUrl);
  url.searchParams.set('area', area);
  url.searchParams.set('key', key);
  const res = await request(url, {
    method: 'POST',
    headers: { 'content-type': 'application/octet-stream', 'x-internal-service-token': token },
    body: content,
  });
  if (res.statusCode !== 201) throw await failure('POST /internal/v1/objects', res.statusCode, res.body);
  await res.body.dump();
}

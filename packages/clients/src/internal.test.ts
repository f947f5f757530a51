import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { putInternalObject, runtimeClient } from './internal.js';

const TOKEN = 'token-for-the-clients-test';

interface Seen {
  url: string;
  headers: IncomingMessage['headers'];
  body: string;
}

/** A real HTTP server standing in for the runtime or a backend: records what it got, answers `answer`. */
async function stub(answer: (seen: Seen) => [number, string]): Promise<{ url: string; seen: Seen[]; server: Server }> {
  const seen: Seen[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const s = { url: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks).toString('utf8') };
      seen.push(s);
      const [status, body] = answer(s);
      res.writeHead(status, { 'content-type': 'application/json' }).end(body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen, server };
}

/** A port nobody listens on. */
async function closedPort(): Promise<string> {
  const s = createServer();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  const { port } = s.address() as AddressInfo;
  await new Promise<void>((resolve) => s.close(() => resolve()));
  return `http://127.0.0.1:${port}`;
}

describe('runtimeClient', () => {
  let runtime: Awaited<ReturnType<typeof stub>>;
  beforeAll(async () => {
    runtime = await stub((s) => {
      if (s.headers['x-internal-service-token'] !== TOKEN)
        return [401, '{"error":"unauthorized","message":"send the internal service token in X-Internal-Service-Token"}'];
      const body = JSON.parse(s.body) as { action: string; notebook?: unknown; workspace_id?: string; files_on_request?: boolean };
      if (body.action === 'list_kernels') return [200, '[]'];
      // Workspace "copies" stands for a runtime that copies the files in (no mount): it asks for them.
      if (body.workspace_id === 'copies' && body.files_on_request) return [409, '{"error":"files_required","message":"send them as `files`"}'];
      if (body.workspace_id === 'refuses') return [409, '{"error":"conflict","message":"something else"}'];
      return [
        200,
        JSON.stringify({
          status: 'ok',
          notebook: body.notebook,
          duration_ms: 5,
          files: [{ path: 'out.txt', content_base64: Buffer.from('hi').toString('base64') }],
        }),
      ];
    });
  });
  afterAll(() => new Promise<void>((resolve) => runtime.server.close(() => resolve())));

  it('ping: list_kernels with the token and the request id is healthy', async () => {
    expect(await runtimeClient(runtime.url, TOKEN).ping('req-1')).toBe(true);
    const last = runtime.seen.at(-1)!;
    expect(last.url).toBe('/api/v1/jupyter');
    expect(JSON.parse(last.body)).toEqual({ action: 'list_kernels' });
    expect(last.headers['x-request-id']).toBe('req-1');
  });

  it('ping: a wrong token is unhealthy; an unreachable runtime rejects', async () => {
    expect(await runtimeClient(runtime.url, 'wrong').ping()).toBe(false);
    await expect(runtimeClient(await closedPort(), TOKEN).ping()).rejects.toThrow();
  });

  it('runNotebook: sends the run context and decodes the files the run wrote', async () => {
    const notebook = { cells: [], nbformat: 4 };
    const result = await runtimeClient<typeof notebook>(runtime.url, TOKEN).runNotebook(notebook, 30, {
      workspaceId: 'ws',
      notebookPath: 'a.ipynb',
      files: [{ path: 'in.csv', content: Buffer.from('a,b\n') }],
    });
    expect(result).toEqual({ status: 'ok', notebook, duration_ms: 5, files: [{ path: 'out.txt', content: Buffer.from('hi') }], files_sent: 1 });
    const sent = JSON.parse(runtime.seen.at(-1)!.body) as Record<string, unknown>;
    expect(sent).toMatchObject({
      action: 'run_notebook',
      workspace_id: 'ws',
      notebook_path: 'a.ipynb',
      files: [{ path: 'in.csv', content_base64: Buffer.from('a,b\n').toString('base64') }],
    });
  });

  it('runNotebook with loadFiles: reads the files only when the runtime asks for them (409 files_required)', async () => {
    const notebook = { cells: [], nbformat: 4 };
    let reads = 0;
    const loadFiles = () => {
      reads++;
      return Promise.resolve([{ path: 'in.csv', content: Buffer.from('a,b\n') }]);
    };
    const client = runtimeClient<typeof notebook>(runtime.url, TOKEN);
    // A runtime that mounts the workspace runs at once: nothing is read or sent.
    const mounted = await client.runNotebook(notebook, 30, { workspaceId: 'mounts', notebookPath: 'a.ipynb', loadFiles });
    expect(mounted).toMatchObject({ status: 'ok', files_sent: 0 });
    expect(reads).toBe(0);
    expect(JSON.parse(runtime.seen.at(-1)!.body)).toMatchObject({ files_on_request: true });
    expect(JSON.parse(runtime.seen.at(-1)!.body)).not.toHaveProperty('files');
    // One that copies them asks; the call is made again with them (and without the flag).
    const before = runtime.seen.length;
    const copied = await client.runNotebook(notebook, 30, { workspaceId: 'copies', notebookPath: 'a.ipynb', loadFiles });
    expect(copied).toMatchObject({ status: 'ok', files_sent: 1 });
    expect(reads).toBe(1);
    expect(runtime.seen.length - before).toBe(2);
    const again = JSON.parse(runtime.seen.at(-1)!.body) as Record<string, unknown>;
    expect(again).toMatchObject({ files: [{ path: 'in.csv', content_base64: Buffer.from('a,b\n').toString('base64') }] });
    expect(again).not.toHaveProperty('files_on_request');
    // Any other 409 is an error, with the runtime's words; the files are not read for it.
    await expect(client.runNotebook(notebook, 30, { workspaceId: 'refuses', notebookPath: 'a.ipynb', loadFiles })).rejects.toThrow(
      /409: conflict: something else/,
    );
    expect(reads).toBe(1);
  });

  it('runNotebook: a refusal names the runtime, the status and its message, never the token', async () => {
    const err = await runtimeClient(runtime.url, 'wrong')
      .runNotebook({}, 30)
      .catch((e: Error) => e);
    expect((err as Error).message).toContain('the runtime answered 401: unauthorized: send the internal service token');
    expect((err as Error).message).not.toContain('wrong');
  });
});

describe('putInternalObject', () => {
  it('posts the bytes with the token to the area and key, and goes on past an unreachable backend', async () => {
    const backend = await stub((s) => (s.headers['x-internal-service-token'] === TOKEN ? [201, '{}'] : [401, '{"error":"unauthorized"}']));
    try {
      const down = await closedPort();
      await putInternalObject([down, backend.url], TOKEN, 'run_log', 'ws/run.log', Buffer.from('log line\n'));
      await putInternalObject([down, backend.url], TOKEN, 'run_log', 'ws/run.log', Buffer.from('log line\n'));
      expect(backend.seen).toHaveLength(2);
      expect(backend.seen[0]).toMatchObject({ url: '/internal/v1/objects?area=run_log&key=ws%2Frun.log', body: 'log line\n' });
      await expect(putInternalObject(backend.url, 'wrong', 'run_log', 'k', Buffer.from('x'))).rejects.toThrow(
        'POST /internal/v1/objects answered 401: unauthorized',
      );
    } finally {
      await new Promise<void>((resolve) => backend.server.close(() => resolve()));
    }
  });
});

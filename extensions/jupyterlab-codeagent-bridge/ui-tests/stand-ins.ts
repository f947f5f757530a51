// Stand-in for the browser test: a fake code-agent server (opencode's HTTP API, docs/contract/spec.md §9.4) that
// the real bridge server part talks to.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** The API key in the fake provider list: the bridge must never pass it on (docs/contract/spec.md §9.4). */
export const FAKE_API_KEY = 'sk-fake-provider-key-never-shown';

export const FIXED_SOURCE = "values = [1, 2, 3]\nprint('mean', sum(values) / len(values))";

function listen(server: Server): Promise<string> {
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(`http://127.0.0.1:${(server.address() as AddressInfo).port}`)));
}

async function readJson(req: IncomingMessage): Promise<unknown> {
  let body = '';
  for await (const chunk of req) body += String(chunk);
  return body === '' ? null : (JSON.parse(body) as unknown);
}

function send(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}

export interface FakeCodeAgent {
  url: string;
  prompts: string[];
  /** The `model` of each prompt (`{providerID, modelID}`), null where the bridge sent none. */
  models: unknown[];
  /** How long each prompt takes (a slow model); 0 by default. */
  delayMs: number;
  close(): Promise<void>;
}

/** Answers every prompt with the same fenced block, like a model that always proposes FIXED_SOURCE. */
export async function startFakeCodeAgent(): Promise<FakeCodeAgent> {
  const prompts: string[] = [];
  const models: unknown[] = [];
  let sessions = 0;
  const state = { delayMs: 0 };
  const server = createServer((req, res) => {
    void (async () => {
      const body = (await readJson(req)) as { parts?: { text?: string }[]; model?: unknown } | null;
      const path = (req.url ?? '').split('?')[0]!;
      if (req.method === 'GET' && path === '/config/providers') {
        return send(res, 200, {
          providers: [
            { id: 'fake', name: 'Fake', models: { 'fake-1': { id: 'fake-1', name: 'Fake One' } }, options: { apiKey: FAKE_API_KEY } },
            {
              id: 'other',
              name: 'Other Labs',
              models: { 'other-1': { id: 'other-1', name: 'Other One' }, 'other-2': { id: 'other-2', name: 'Other Two' } },
              options: {},
            },
          ],
          default: { fake: 'fake-1', other: 'other-2' },
        });
      }
      if (req.method === 'POST' && path === '/session') return send(res, 200, { id: `ses_${++sessions}` });
      const m = /^\/session\/([^/]+)\/message$/.exec(path);
      if (req.method === 'POST' && m) {
        prompts.push(body?.parts?.map((p) => p.text ?? '').join('\n') ?? '');
        models.push(body?.model ?? null);
        if (state.delayMs > 0) await new Promise((r) => setTimeout(r, state.delayMs));
        if (res.destroyed) return;
        return send(res, 200, {
          info: { id: 'msg_1', sessionID: m[1], role: 'assistant' },
          parts: [{ type: 'text', text: `The cell divided by zero. Here is the whole cell:\n\n\`\`\`python\n${FIXED_SOURCE}\n\`\`\`\n` }],
        });
      }
      send(res, 404, { name: 'NotFoundError' });
    })();
  });
  const url = await listen(server);
  return {
    url,
    prompts,
    models,
    get delayMs() {
      return state.delayMs;
    },
    set delayMs(ms: number) {
      state.delayMs = ms;
    },
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

// Stand-ins for the browser test: a fake code-agent server (opencode's HTTP API, SPEC §9.4) and,
// until the bridge server part (issue 6) is merged, a minimal bridge that implements the two
// routes the extension calls (SPEC §9.2 `/providers`, `/edit`) with the same auth and errors.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { parseBearer, verifyUserToken } from '@codeagent/auth';

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
  /** How long each prompt takes (a slow model); 0 by default. */
  delayMs: number;
  close(): Promise<void>;
}

/** Answers every prompt with the same fenced block, like a model that always proposes FIXED_SOURCE. */
export async function startFakeCodeAgent(): Promise<FakeCodeAgent> {
  const prompts: string[] = [];
  let sessions = 0;
  const state = { delayMs: 0 };
  const server = createServer((req, res) => {
    void (async () => {
      const body = (await readJson(req)) as { parts?: { text?: string }[] } | null;
      const path = (req.url ?? '').split('?')[0]!;
      if (req.method === 'GET' && path === '/config/providers') {
        return send(res, 200, { providers: [{ id: 'fake', name: 'Fake', models: { 'fake-1': { id: 'fake-1', name: 'Fake One' } }, options: { apiKey: 'secret' } }], default: { fake: 'fake-1' } });
      }
      if (req.method === 'POST' && path === '/session') return send(res, 200, { id: `ses_${++sessions}` });
      const m = /^\/session\/([^/]+)\/message$/.exec(path);
      if (req.method === 'POST' && m) {
        prompts.push(body?.parts?.map((p) => p.text ?? '').join('\n') ?? '');
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

export interface StandInBridge {
  url: string;
  /** Bodies of the `/edit` requests received, as the extension sent them. */
  edits: Record<string, unknown>[];
  close(): Promise<void>;
}

/** The two bridge routes the extension uses, per SPEC §9.2 (user token, upstream errors → 502). */
export async function startStandInBridge(upstream: string, jwtSecret: string): Promise<StandInBridge> {
  const edits: Record<string, unknown>[] = [];
  const server = createServer((req, res) => {
    void (async () => {
      const token = parseBearer(req.headers.authorization) || /(?:^|;\s*)codeagent_session=([^;]+)/.exec(req.headers.cookie ?? '')?.[1] || '';
      try {
        await verifyUserToken(token, jwtSecret);
      } catch {
        return send(res, 401, { error: 'unauthorized', message: 'log in first' });
      }
      const path = (req.url ?? '').split('?')[0];
      try {
        if (req.method === 'GET' && path === '/codeagent-bridge/providers') {
          const r = (await (await fetch(`${upstream}/config/providers`)).json()) as { providers: { id: string; name: string; models: Record<string, { id: string; name: string }> }[]; default: Record<string, string> };
          return send(res, 200, { providers: r.providers.map((p) => ({ id: p.id, name: p.name, models: Object.values(p.models).map((m) => ({ id: m.id, name: m.name })) })), default: r.default });
        }
        if (req.method === 'POST' && path === '/codeagent-bridge/edit') {
          const body = (await readJson(req)) as Record<string, unknown>;
          edits.push(body);
          const started = Date.now();
          const session = (await (await fetch(`${upstream}/session`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })).json()) as { id: string };
          const reply = (await (
            await fetch(`${upstream}/session/${session.id}/message`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ parts: [{ type: 'text', text: JSON.stringify(body) }] }) })
          ).json()) as { parts: { type: string; text?: string }[] };
          const text = reply.parts.map((p) => p.text ?? '').join('\n');
          const block = /```[^\n]*\n([\s\S]*?)\n```/.exec(text);
          if (!block) return send(res, 502, { error: 'upstream_error', status: 200, message: 'no code block in the reply' });
          return send(res, 200, { source: block[1], explanation: text.split('```')[0]!.trim(), session_id: session.id, provider: 'fake', model: 'fake-1', duration_ms: Date.now() - started });
        }
        send(res, 404, { error: 'not_found' });
      } catch {
        send(res, 502, { error: 'upstream_unreachable', message: 'the code-agent server is not reachable' });
      }
    })();
  });
  const url = await listen(server);
  return {
    url,
    edits,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

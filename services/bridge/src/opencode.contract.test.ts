import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync } from 'node:fs';
import { createRequire } from 'node:module';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { createTestDatabase, type TestDatabase } from '@codeagent/db';
import { issueUserToken } from '@codeagent/auth';
import { freePort, type ErrorBody } from '@codeagent/service-kit';
import { buildBridgeApp } from './app.js';

const require = createRequire(import.meta.url);
const SECRET = 'bridge-contract-secret-that-is-long-enough';
const PASSWORD = 'opencode-test-password';
/** The answer of `POST /codeagent-bridge/edit` (app.ts): the fields these tests read. */
type Edit = { source: string; session_id: string };
const FIXED = 'def safe_divide(a, b):\n    return a / b if b else float("nan")\n\nprint(safe_divide(1, 0))';

function opencodeBinary(): string {
  const pkg = require.resolve('opencode-linux-x64/package.json');
  return join(dirname(pkg), 'bin', 'opencode');
}

/** What the fake LLM was asked: the model, and the names of the tools offered to it. */
interface LlmCall {
  model: string;
  tools: string[];
  /** The role of the last message (`tool`: the answer to a tool call). */
  last: string;
}

/**
 * A tiny OpenAI-compatible LLM (SSE). `fake-model` always answers with the fixed cell in a fenced
 * block. `tool-model` first answers with a call of the `bash` tool running `command` (what a
 * prompt injection makes a model do), and, once it has the tool's result, with the fixed cell.
 */
function fakeLlm(command: string): Promise<{ server: Server; url: string; calls: () => number; log: LlmCall[]; toolCalls: () => number }> {
  let calls = 0;
  let toolCalls = 0;
  const log: LlmCall[] = [];
  const server = createServer((req, res) => {
    let raw = '';
    req.on('data', (c: Buffer) => (raw += c.toString()));
    req.on('end', () => {
      calls++;
      const body = JSON.parse(raw) as { model?: string; tools?: { function?: { name?: string } }[]; messages?: { role?: string }[] };
      const call = { model: body.model ?? '', tools: (body.tools ?? []).map((t) => t.function?.name ?? ''), last: body.messages?.at(-1)?.role ?? '' };
      log.push(call);
      const isTitle = call.model !== 'tool-model' && raw.includes('title');
      const content = isTitle ? 'Fix division' : `Here is the fixed cell:\n\n\`\`\`python\n${FIXED}\n\`\`\`\n\nIt no longer divides by zero.`;
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
      const base = { id: 'chatcmpl-1', object: 'chat.completion.chunk', created: Math.floor(Date.now() / 1000), model: call.model };
      const send = (obj: unknown) => res.write(`data: ${JSON.stringify(obj)}\n\n`);
      const usage = { prompt_tokens: 10, completion_tokens: 20, total_tokens: 30 };
      send({ ...base, choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }] });
      if (call.model === 'tool-model' && call.last !== 'tool') {
        toolCalls++;
        const args = JSON.stringify({ command, description: 'Runs a command' });
        send({
          ...base,
          choices: [
            {
              index: 0,
              delta: { tool_calls: [{ index: 0, id: `call_${toolCalls}`, type: 'function', function: { name: 'bash', arguments: args } }] },
              finish_reason: null,
            },
          ],
        });
        send({ ...base, choices: [{ index: 0, delta: {}, finish_reason: 'tool_calls' }], usage });
        return res.end('data: [DONE]\n\n');
      }
      for (const piece of content.match(/[\s\S]{1,40}/g) ?? []) send({ ...base, choices: [{ index: 0, delta: { content: piece }, finish_reason: null }] });
      send({ ...base, choices: [{ index: 0, delta: {}, finish_reason: 'stop' }], usage });
      res.end('data: [DONE]\n\n');
    });
  });
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () =>
      resolve({ server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, calls: () => calls, log, toolCalls: () => toolCalls }),
    ),
  );
}

/** Contract tests against the real `opencode serve` from npm (opencode-ai), fully offline. */
describe('bridge against the real opencode server', () => {
  let llm: Awaited<ReturnType<typeof fakeLlm>>;
  let opencode: ChildProcess;
  let opencodeUrl: string;
  let t: TestDatabase;
  let app: FastifyInstance;
  let token: string;
  let home: string;
  let marker: string;
  const auth = () => ({ authorization: `Bearer ${token}` });
  const basic = () => ({ authorization: `Basic ${Buffer.from(`opencode:${PASSWORD}`).toString('base64')}` });

  beforeAll(async () => {
    expect(existsSync(opencodeBinary()), 'opencode-ai is a devDependency of services/bridge: run npm ci').toBe(true);
    home = mkdtempSync(join(tmpdir(), 'codeagent-opencode-'));
    // Inside the sessions' directory: opencode would run it there without asking (outside, it asks first).
    marker = join(home, 'tool-ran');
    llm = await fakeLlm(`touch ${marker}`);
    const port = await freePort();
    const config = {
      provider: {
        fake: {
          npm: '@ai-sdk/openai-compatible',
          name: 'Fake LLM',
          options: { baseURL: `${llm.url}/v1`, apiKey: 'dummy' },
          models: { 'fake-model': { name: 'Fake Model', tool_call: false } },
        },
        // A model that uses tools (decision 0240).
        faketools: {
          npm: '@ai-sdk/openai-compatible',
          name: 'Fake LLM with tools',
          options: { baseURL: `${llm.url}/v1`, apiKey: 'dummy' },
          models: { 'tool-model': { name: 'Tool Model', tool_call: true } },
        },
      },
      model: 'fake/fake-model',
      small_model: 'fake/fake-model',
      enabled_providers: ['fake', 'faketools'],
      share: 'disabled',
      autoupdate: false,
    };
    opencode = spawn(opencodeBinary(), ['serve', '--port', String(port), '--hostname', '127.0.0.1'], {
      cwd: home,
      env: {
        PATH: process.env.PATH,
        HOME: home,
        XDG_CONFIG_HOME: join(home, 'config'),
        XDG_DATA_HOME: join(home, 'data'),
        XDG_CACHE_HOME: join(home, 'cache'),
        XDG_STATE_HOME: join(home, 'state'),
        OPENCODE_SERVER_PASSWORD: PASSWORD,
        OPENCODE_CONFIG_CONTENT: JSON.stringify(config),
        OPENCODE_DISABLE_AUTOUPDATE: '1',
        OPENCODE_DISABLE_MODELS_FETCH: '1',
        OPENCODE_DISABLE_LSP_DOWNLOAD: '1',
        OPENCODE_DISABLE_SHARE: '1',
        npm_config_registry: 'http://127.0.0.1:9/',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`opencode did not start:\n${out}`)), 60_000);
      const onData = (c: Buffer) => {
        out += c.toString();
        if (/opencode server listening on/.test(out)) {
          clearTimeout(timer);
          resolve();
        }
      };
      opencode.stdout?.on('data', onData);
      opencode.stderr?.on('data', onData);
      opencode.once('exit', (code) => reject(new Error(`opencode exited (${code}):\n${out}`)));
    });
    opencodeUrl = `http://127.0.0.1:${port}`;
    t = await createTestDatabase();
    const user = await t.database.db
      .insertInto('users')
      .values({ email: 'c@example.com', name: 'C', password_hash: 'x', platform_role_id: 'user' })
      .returning('id')
      .executeTakeFirstOrThrow();
    token = (await issueUserToken(user.id, SECRET, 3600)).token;
    app = await buildBridgeApp({
      db: t.database.db,
      jwtSecret: SECRET,
      env: { url: opencodeUrl, user: 'opencode', password: PASSWORD, allowedHosts: [] },
      workdir: home,
    });
  }, 90_000);

  afterAll(async () => {
    await app?.close();
    opencode?.kill('SIGKILL');
    llm?.server.close();
    await t?.drop();
  });

  const fix = (notebook: string, settings: Record<string, unknown> = {}) =>
    app.inject({
      method: 'POST',
      url: '/codeagent-bridge/edit',
      headers: auth(),
      payload: {
        notebook_path: notebook,
        action: 'fix',
        cell: { id: 'c1', source: 'print(1 / 0)' },
        errors: [{ ename: 'ZeroDivisionError', evalue: 'division by zero', traceback: ['\u001b[0;31mZeroDivisionError\u001b[0m: division by zero'] }],
        settings: { requestTimeoutSeconds: 60, ...settings },
      },
    });

  it('lists the providers of the server, ids and names only', async () => {
    const res = await app.inject({ method: 'GET', url: '/codeagent-bridge/providers', headers: auth() });
    expect(res.statusCode).toBe(200);
    const fake = res.json<{ providers: { id: string }[] }>().providers.find((p) => p.id === 'fake');
    expect(fake).toEqual({ id: 'fake', name: 'Fake LLM', models: [{ id: 'fake-model', name: 'Fake Model' }] });
    expect(res.body).not.toContain('dummy');
  });

  it("fixes a cell with the fake model's code, reusing the notebook's session", async () => {
    const first = await fix('work/a.ipynb');
    expect(first.statusCode, first.body).toBe(200);
    expect(first.json<Edit>().source).toBe(FIXED);
    expect(first.json<Edit>().session_id).toMatch(/^ses/);
    const again = await fix('work/a.ipynb');
    expect(again.json<Edit>().session_id).toBe(first.json<Edit>().session_id);
    const other = await fix('work/b.ipynb');
    expect(other.json<Edit>().session_id).not.toBe(first.json<Edit>().session_id);
  }, 120_000);

  it('runs no tool, even when the model calls one (a prompt injection): every tool is off (decision 0240)', async () => {
    const before = llm.log.length;
    const res = await fix('work/injected.ipynb', { codeagentProvider: 'faketools', codeagentModel: 'tool-model' });
    expect(res.statusCode, res.body).toBe(200);
    // The model asked for `bash` to run; opencode refused it, and the model's next answer is the edit.
    expect(llm.toolCalls()).toBeGreaterThan(0);
    expect(existsSync(marker), 'the bash tool ran the command the model asked for').toBe(false);
    expect(res.json<Edit>().source).toBe(FIXED);
    // No tool was even offered to the model.
    const asked = llm.log.slice(before).filter((c) => c.model === 'tool-model');
    expect(asked.map((c) => c.last)).toEqual(['user', 'tool']);
    expect(asked.flatMap((c) => c.tools)).toEqual([]);
    // opencode keeps the switch as the session's own rule: deny every permission.
    const session = (await (await fetch(`${opencodeUrl}/session/${res.json<Edit>().session_id}`, { headers: basic() })).json()) as { permission?: unknown };
    expect(session.permission).toEqual(expect.arrayContaining([{ permission: '*', pattern: '*', action: 'deny' }]));
  }, 120_000);

  it('recreates a session that was deleted upstream', async () => {
    const before = (await fix('work/c.ipynb')).json<Edit>().session_id;
    const del = await fetch(`${opencodeUrl}/session/${before}`, { method: 'DELETE', headers: basic() });
    expect(del.status).toBe(200);
    const after = await fix('work/c.ipynb');
    expect(after.statusCode).toBe(200);
    expect(after.json<Edit>().session_id).not.toBe(before);
  }, 120_000);

  it('reports a wrong password as 502 upstream_auth_failed', async () => {
    const wrong = await buildBridgeApp({
      db: t.database.db,
      jwtSecret: SECRET,
      env: { url: opencodeUrl, user: 'opencode', password: 'wrong', allowedHosts: [] },
      workdir: '/tmp',
    });
    const res = await wrong.inject({ method: 'GET', url: '/codeagent-bridge/providers', headers: auth() });
    expect(res.statusCode).toBe(502);
    expect(res.json<ErrorBody>().error).toBe('upstream_auth_failed');
    await wrong.close();
  });
});

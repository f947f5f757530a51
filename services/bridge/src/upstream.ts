import type * as Undici from 'undici';
import type { Dispatcher } from 'undici';
import { AppError } from '@codeagent/service-kit';
import type { ResolvedSettings } from './settings.js';

/** Failures of the code-agent server, with the bodies of docs/contract/spec.md §9.2. */
export const upstreamUnreachable = (url: string) =>
  new AppError(502, 'upstream_unreachable', `the code agent at ${url} is not reachable; start it with \`opencode serve --port 4096\``);
export const upstreamTimeout = (s: number) => new AppError(504, 'upstream_timeout', `the code agent did not answer within ${s} s (requestTimeoutSeconds)`);
export const upstreamAuthFailed = () =>
  new AppError(
    502,
    'upstream_auth_failed',
    'the code agent refused the credentials; check CODEAGENT_BRIDGE_USER and CODEAGENT_BRIDGE_PASSWORD (opencode: OPENCODE_SERVER_USERNAME/PASSWORD)',
  );
export const upstreamError = (status: number, message: string) => new AppError(502, 'upstream_error', message, { status });

export class SessionGoneError extends Error {}

export interface Provider {
  id: string;
  name: string;
  models: { id: string; name: string }[];
}

export interface PromptReply {
  text: string;
  providerID: string;
  modelID: string;
  /** The reply holds tool calls (refused: tools are off, decision 0240). */
  triedTools: boolean;
}

/** undici, imported on the first call to the code agent rather than by an idle bridge (decision 0085). */
let undici: Promise<typeof Undici> | undefined;
const loadUndici = () => (undici ??= import('undici'));

const SESSION_ID = /^ses[A-Za-z0-9_-]{1,200}$/;

/**
 * The tools of opencode 1.18 (`GET /experimental/tool/ids`), each turned off by name as well: for
 * a compatible server that does not expand the wildcard (decision 0240).
 */
export const KNOWN_TOOLS = [
  'bash',
  'read',
  'glob',
  'grep',
  'edit',
  'write',
  'apply_patch',
  'task',
  'webfetch',
  'websearch',
  'todowrite',
  'question',
  'skill',
  'invalid',
] as const;

/**
 * The `tools` field of every prompt (decision 0240): every tool off. opencode 1.18 turns it into
 * the session's permission rules (`{"permission":"*","pattern":"*","action":"deny"}`, kept on the
 * session), offers the model no tool at all, and refuses a tool call the model makes anyway. A
 * prompt carries user text (a cell, an instruction): without this, anyone logged in could talk
 * the agent into running commands, writing files or fetching URLs on the code agent's host.
 */
export const TOOLS_OFF: Readonly<Record<string, false>> = Object.freeze({ '*': false, ...Object.fromEntries(KNOWN_TOOLS.map((t) => [t, false] as const)) });

/** A small typed client of the opencode server API (§9.4), over undici (imported on the first call). */
export class OpencodeClient {
  private readonly headers: Record<string, string>;

  constructor(
    private readonly settings: ResolvedSettings,
    private readonly directory: string,
  ) {
    this.headers = { 'content-type': 'application/json', 'x-opencode-directory': directory };
    if (settings.password !== '') {
      this.headers.authorization = `Basic ${Buffer.from(`${settings.user}:${settings.password}`).toString('base64')}`;
    }
  }

  private async call(
    method: Dispatcher.HttpMethod,
    path: string,
    body: unknown,
    timeoutMs: number,
    signal?: AbortSignal,
  ): Promise<{ status: number; json: unknown }> {
    // undici refuses a negative timeout (UND_ERR_INVALID_ARG, which is not a timeout) and takes 0 for none.
    if (!(timeoutMs >= 1)) throw upstreamTimeout(this.settings.timeoutSeconds);
    const { request } = await loadUndici();
    let res: Dispatcher.ResponseData;
    try {
      res = await request(`${this.settings.url}${path}`, {
        method,
        headers: this.headers,
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        headersTimeout: timeoutMs,
        bodyTimeout: timeoutMs,
        ...(signal ? { signal } : {}),
      });
    } catch (err) {
      const code = (err as { code?: string }).code;
      if (signal?.aborted || code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT') throw upstreamTimeout(this.settings.timeoutSeconds);
      throw upstreamUnreachable(this.settings.url);
    }
    const text = await res.body.text();
    if (res.statusCode === 401 || res.statusCode === 403) throw upstreamAuthFailed();
    let json: unknown = undefined;
    try {
      json = text === '' ? undefined : JSON.parse(text);
    } catch {
      if (res.statusCode < 300) throw upstreamError(res.statusCode, 'the code agent answered with something that is not JSON');
    }
    return { status: res.statusCode, json };
  }

  async providers(timeoutMs: number): Promise<{ providers: Provider[]; default: Record<string, string> }> {
    const { status, json } = await this.call('GET', '/config/providers', undefined, timeoutMs);
    if (status !== 200) throw upstreamError(status, `GET /config/providers answered ${status}`);
    const body = json as { providers?: unknown; default?: unknown };
    if (!Array.isArray(body?.providers)) throw upstreamError(status, 'the provider list of the code agent is malformed');
    // Ids and names only: provider objects carry `options` that may hold API keys.
    const providers = body.providers.map((p: { id?: unknown; name?: unknown; models?: unknown }) => ({
      id: text(p.id),
      name: text(p.name ?? p.id),
      models: Object.values((p.models ?? {}) as Record<string, { id?: unknown; name?: unknown }>).map((m) => ({
        id: text(m.id),
        name: text(m.name ?? m.id),
      })),
    }));
    const def: Record<string, string> = {};
    for (const [k, v] of Object.entries((body.default ?? {}) as Record<string, unknown>)) def[k] = String(v);
    return { providers, default: def };
  }

  async createSession(title: string, timeoutMs: number): Promise<string> {
    const { status, json } = await this.call('POST', `/session?directory=${encodeURIComponent(this.directory)}`, { title }, timeoutMs);
    const id = (json as { id?: unknown } | undefined)?.id;
    if (status !== 200 || typeof id !== 'string' || !SESSION_ID.test(id)) throw upstreamError(status, 'the code agent did not create a session');
    return id;
  }

  async deleteSession(id: string, timeoutMs: number): Promise<void> {
    if (!SESSION_ID.test(id)) return;
    await this.call('DELETE', `/session/${id}`, undefined, timeoutMs).catch(() => undefined);
  }

  async abort(id: string): Promise<void> {
    if (!SESSION_ID.test(id)) return;
    await this.call('POST', `/session/${id}/abort`, {}, 5000).catch(() => undefined);
  }

  /**
   * Sends one prompt, with every tool off (TOOLS_OFF), and waits for the whole reply; a stored
   * session that is gone throws SessionGoneError. No time left (`timeoutMs` < 1): 504
   * upstream_timeout at once, nothing is sent.
   */
  async prompt(id: string, text: string, providerID: string, modelID: string, timeoutMs: number): Promise<PromptReply> {
    if (!SESSION_ID.test(id)) throw new SessionGoneError(id);
    if (!(timeoutMs >= 1)) throw upstreamTimeout(this.settings.timeoutSeconds);
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), timeoutMs);
    try {
      const body = {
        parts: [{ type: 'text', text }],
        ...(providerID && modelID ? { model: { providerID, modelID } } : {}),
        tools: TOOLS_OFF,
      };
      const { status, json } = await this.call('POST', `/session/${id}/message`, body, timeoutMs, controller.signal);
      if (status === 404) throw new SessionGoneError(id);
      if (status !== 200) throw upstreamError(status, `the code agent answered ${status}`);
      const reply = json as { info?: { error?: unknown; providerID?: string; modelID?: string }; parts?: { type?: string; text?: string }[] } | undefined;
      if (!reply || !Array.isArray(reply.parts)) throw upstreamError(status, 'the reply of the code agent is malformed');
      if (reply.info?.error) {
        const e = reply.info.error as { name?: string; data?: { message?: string } };
        throw upstreamError(status, `the code agent failed: ${e.data?.message ?? e.name ?? 'unknown error'}`);
      }
      const textParts = reply.parts.filter((p) => p.type === 'text' && typeof p.text === 'string').map((p) => p.text as string);
      return {
        text: textParts.join('\n'),
        providerID: reply.info?.providerID ?? providerID,
        modelID: reply.info?.modelID ?? modelID,
        triedTools: reply.parts.some((p) => p.type === 'tool'),
      };
    } catch (err) {
      // Our timer or undici's own headers/body timeout (whichever fires first): either way the
      // generation goes on upstream unless it is stopped.
      if (controller.signal.aborted || (err instanceof AppError && err.code === 'upstream_timeout')) {
        // Stop the generation upstream too, not only our wait for it.
        await this.abort(id);
        throw upstreamTimeout(this.settings.timeoutSeconds);
      }
      throw err;
    } finally {
      clearTimeout(timer);
    }
  }

  /** Health: reachable and how fast (any HTTP answer counts). */
  async ping(timeoutMs: number): Promise<number | undefined> {
    const { request } = await loadUndici();
    const t = Date.now();
    try {
      const res = await request(`${this.settings.url}/global/health`, { headers: this.headers, headersTimeout: timeoutMs, bodyTimeout: timeoutMs });
      await res.body.dump();
      return Date.now() - t;
    } catch {
      return undefined;
    }
  }
}

/** A field of the code agent's JSON as text: strings and numbers as they are, anything else empty. */
function text(value: unknown): string {
  return typeof value === 'string' || typeof value === 'number' ? String(value) : '';
}

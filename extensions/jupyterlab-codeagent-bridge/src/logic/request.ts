import { extractErrors, stripAnsi, type CellError, type OutputLike } from './errors';
import type { BridgeSettings } from './settings';

export type EditAction = 'optimize' | 'fix' | 'edit';

/** Body of `POST {baseUrl}codeagent-bridge/edit` (docs/contract/spec.md §9.2). */
export interface EditRequest {
  notebook_path: string;
  action: EditAction;
  cell: { id: string; source: string; cell_type?: string; outputs?: OutputLike[] };
  errors: CellError[];
  instruction?: string;
  settings?: Partial<BridgeSettings>;
}

/** Answer of `/edit` (docs/contract/spec.md §9.2). */
export interface EditResponse {
  source: string;
  explanation: string;
  session_id: string;
  provider: string;
  model: string;
  duration_ms: number;
}

export interface CellSnapshot {
  id: string;
  source: string;
  cell_type: string;
  outputs: readonly OutputLike[];
}

/** Longest text kept per output: the agent needs the gist, not megabytes of printout. */
export const MAX_OUTPUT_TEXT = 8_000;

function clip(text: string): string {
  return text.length <= MAX_OUTPUT_TEXT ? text : `${text.slice(0, MAX_OUTPUT_TEXT)}\n… [${text.length - MAX_OUTPUT_TEXT} more characters]`;
}

function joined(v: unknown): string {
  return Array.isArray(v) ? v.map(String).join('') : typeof v === 'string' ? v : '';
}

/**
 * The outputs as sent to the bridge: text only (stream text, `text/plain` of results, errors
 * without colour codes), each clipped; images and other rich data are left out (a base64 plot
 * would cost the agent tokens and tell it nothing).
 */
export function compactOutputs(outputs: readonly OutputLike[]): OutputLike[] {
  return outputs.map((o) => {
    switch (o.output_type) {
      case 'stream':
        return { output_type: 'stream', name: typeof o.name === 'string' ? o.name : 'stdout', text: clip(stripAnsi(joined(o.text))) };
      case 'error': {
        const [e] = extractErrors([o]);
        // eslint-disable-next-line @typescript-eslint/no-unnecessary-type-assertion -- needed under the test tsconfig (noUncheckedIndexedAccess), not under the extension's own
        return { output_type: 'error', ename: e!.ename, evalue: e!.evalue, traceback: e!.traceback };
      }
      case 'execute_result':
      case 'display_data': {
        const data = (typeof o.data === 'object' && o.data !== null ? o.data : {}) as Record<string, unknown>;
        const out: OutputLike = { output_type: o.output_type, data: 'text/plain' in data ? { 'text/plain': clip(stripAnsi(joined(data['text/plain']))) } : {} };
        const omitted = Object.keys(data).filter((k) => k !== 'text/plain');
        if (omitted.length > 0) out.omitted_mime_types = omitted;
        return out;
      }
      default:
        return { output_type: o.output_type };
    }
  });
}

export interface BuildOptions {
  notebookPath: string;
  action: EditAction;
  cell: CellSnapshot;
  instruction?: string;
  settings: Partial<BridgeSettings>;
}

/** Builds the request: the cell (outputs compacted), its structured errors, the instruction (edit) and the explicit settings. */
export function buildEditRequest(o: BuildOptions): EditRequest {
  if (o.action === 'edit' && (o.instruction ?? '').trim() === '') {
    throw new Error('edit needs an instruction');
  }
  const req: EditRequest = {
    notebook_path: o.notebookPath,
    action: o.action,
    cell: { id: o.cell.id, source: o.cell.source, cell_type: o.cell.cell_type, outputs: compactOutputs(o.cell.outputs) },
    errors: extractErrors(o.cell.outputs),
  };
  if (o.action === 'edit') req.instruction = (o.instruction ?? '').trim();
  if (Object.keys(o.settings).length > 0) req.settings = { ...o.settings };
  return req;
}

/** `{baseUrl}codeagent-bridge/<route>`: the bridge is addressed relative to JupyterLab's base URL. */
export function bridgeUrl(baseUrl: string, route: 'edit' | 'providers'): string {
  return `${baseUrl.endsWith('/') ? baseUrl : `${baseUrl}/`}codeagent-bridge/${route}`;
}

/**
 * Where the user changes the extension's settings, as the menus of the lab host name it
 * (the Settings menu opens the Settings Editor, whose list names the schema's title).
 */
export const SETTINGS_PLACE = 'Settings › Settings Editor › Code agent bridge';

/** A failed request, with what went wrong and what the user can do about it. */
export class BridgeRequestError extends Error {
  constructor(
    readonly kind: 'timeout' | 'cancelled' | 'network' | 'http' | 'invalid_response',
    readonly cause_: string,
    readonly fix: string,
    readonly status?: number,
  ) {
    super(`${cause_} ${fix}`.trim());
    this.name = 'BridgeRequestError';
  }
}

/** Turns a non-2xx answer of the bridge into a cause and a fix the user can act on. */
export function describeHttpFailure(status: number, body: unknown, timeoutS: number): BridgeRequestError {
  const b = (typeof body === 'object' && body !== null ? body : {}) as { error?: unknown; message?: unknown; status?: unknown };
  const code = typeof b.error === 'string' ? b.error : '';
  const msg = typeof b.message === 'string' ? ` (${b.message})` : '';
  const e = (cause: string, fix: string) => new BridgeRequestError('http', cause, fix, status);
  switch (code) {
    case 'upstream_unreachable':
      return e('The code-agent server is not reachable.', `Start it (\`opencode serve\`) or correct "Code-agent server URL" in ${SETTINGS_PLACE}.`);
    case 'upstream_timeout':
      return e(`The code-agent server did not answer within ${timeoutS} s.`, `Try again, or raise "Request time-out (seconds)" in ${SETTINGS_PLACE}.`);
    case 'upstream_auth_failed':
      return e('The code-agent server refused the credentials.', `Check CODEAGENT_BRIDGE_PASSWORD or "Code-agent server password" in ${SETTINGS_PLACE}.`);
    case 'upstream_error':
      return e(
        `The code-agent server failed${typeof b.status === 'number' ? ` (HTTP ${b.status})` : ''}${msg}.`,
        `Check its log, and the provider and model (the model picker in the notebook toolbar, or ${SETTINGS_PLACE}), then try again.`,
      );
    case 'invalid_request':
      return e(`The bridge refused the request${msg}.`, `Check ${SETTINGS_PLACE} (URL must be a local http(s) address, time-out 5–600 s).`);
    default:
      break;
  }
  if (status === 401) return e('You are not logged in to the platform.', 'Log in again and reload this page.');
  if (status === 403) return e('The platform refused the request.', 'Reload the page; if it persists, log in again.');
  if (status === 404) return e('The bridge is not available at this address.', 'Check that the codeagent bridge component is running behind the gateway.');
  if (status === 502 || status === 503) return e('The bridge is not reachable.', 'Start the bridge (`codeagent bridge`) and try again.');
  if (status === 504) return e('The bridge did not answer in time.', `Try again, or raise "Request time-out (seconds)" in ${SETTINGS_PLACE}.`);
  return e(`The bridge answered HTTP ${status}${msg}.`, 'Try again; if it persists, look at the bridge log.');
}

export function parseEditResponse(body: unknown): EditResponse {
  const b = body as Partial<Record<keyof EditResponse, unknown>> | null;
  if (typeof b !== 'object' || b === null || typeof b.source !== 'string') {
    throw new BridgeRequestError('invalid_response', 'The bridge answered without a new cell source.', 'Try again; if it persists, look at the bridge log.');
  }
  return {
    source: b.source,
    explanation: typeof b.explanation === 'string' ? b.explanation : '',
    session_id: typeof b.session_id === 'string' ? b.session_id : '',
    provider: typeof b.provider === 'string' ? b.provider : '',
    model: typeof b.model === 'string' ? b.model : '',
    duration_ms: typeof b.duration_ms === 'number' ? b.duration_ms : 0,
  };
}

export type Send = (url: string, init: RequestInit) => Promise<Response>;

/**
 * Sends an edit request and waits at most `timeoutS` seconds. `signal` cancels it (the user's
 * cancel button). Every failure is a BridgeRequestError naming cause and fix.
 */
export async function requestEdit(send: Send, url: string, req: EditRequest, timeoutS: number, signal?: AbortSignal): Promise<EditResponse> {
  const controller = new AbortController();
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    controller.abort();
  }, timeoutS * 1000);
  const onCancel = () => controller.abort();
  signal?.addEventListener('abort', onCancel);
  try {
    let res: Response;
    try {
      res = await send(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(req),
        signal: controller.signal,
      });
    } catch (err) {
      if (timedOut)
        throw new BridgeRequestError('timeout', `No answer within ${timeoutS} s.`, `Try again, or raise "Request time-out (seconds)" in ${SETTINGS_PLACE}.`);
      if (signal?.aborted) throw new BridgeRequestError('cancelled', 'Cancelled.', '');
      throw new BridgeRequestError(
        'network',
        `The platform could not be reached (${(err as Error).message}).`,
        'Check the connection and that the platform is running.',
      );
    }
    let body: unknown = null;
    try {
      body = await res.json();
    } catch {
      body = null;
    }
    if (!res.ok) throw describeHttpFailure(res.status, body, timeoutS);
    return parseEditResponse(body);
  } catch (err) {
    if (err instanceof BridgeRequestError) throw err;
    if (timedOut)
      throw new BridgeRequestError('timeout', `No answer within ${timeoutS} s.`, `Try again, or raise "Request time-out (seconds)" in ${SETTINGS_PLACE}.`);
    if (signal?.aborted) throw new BridgeRequestError('cancelled', 'Cancelled.', '');
    throw err;
  } finally {
    clearTimeout(timer);
    signal?.removeEventListener('abort', onCancel);
  }
}

import { describe, expect, it, vi } from 'vitest';
import {
  BridgeRequestError,
  bridgeUrl,
  buildEditRequest,
  compactOutputs,
  describeHttpFailure,
  MAX_OUTPUT_TEXT,
  requestEdit,
  SETTINGS_PLACE,
  type Send,
} from './request';

const cell = {
  id: 'c1',
  source: '1/0',
  cell_type: 'code',
  outputs: [
    { output_type: 'error', ename: 'ZeroDivisionError', evalue: 'division by zero', traceback: ['\u001b[0;31mZeroDivisionError\u001b[0m: division by zero'] },
  ],
};

const answer = { source: '1/1', explanation: 'fixed', session_id: 's1', provider: 'p', model: 'm', duration_ms: 12 };

/** The BridgeRequestError a request ends with (fails the test when it succeeds instead). */
async function failureOf(p: Promise<unknown>): Promise<BridgeRequestError> {
  try {
    await p;
  } catch (err) {
    if (err instanceof BridgeRequestError) return err;
    throw err;
  }
  throw new Error('expected the request to fail');
}

function jsonResponse(status: number, body: unknown): Response {
  return new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json' } });
}

describe('buildEditRequest', () => {
  it('carries path, action, the cell with its outputs, plain structured errors and the explicit settings', () => {
    const req = buildEditRequest({ notebookPath: 'dir/a.ipynb', action: 'fix', cell, settings: { codeagentModel: 'm' } });
    expect(req).toEqual({
      notebook_path: 'dir/a.ipynb',
      action: 'fix',
      cell: {
        id: 'c1',
        source: '1/0',
        cell_type: 'code',
        outputs: [{ output_type: 'error', ename: 'ZeroDivisionError', evalue: 'division by zero', traceback: ['ZeroDivisionError: division by zero'] }],
      },
      errors: [{ ename: 'ZeroDivisionError', evalue: 'division by zero', traceback: ['ZeroDivisionError: division by zero'] }],
      settings: { codeagentModel: 'm' },
    });
    expect(req).not.toHaveProperty('instruction');
  });
  it('omits settings when none were set, and requires an instruction for edit', () => {
    expect(buildEditRequest({ notebookPath: 'a.ipynb', action: 'optimize', cell, settings: {} })).not.toHaveProperty('settings');
    expect(() => buildEditRequest({ notebookPath: 'a.ipynb', action: 'edit', cell, settings: {}, instruction: '  ' })).toThrow(/instruction/);
    expect(buildEditRequest({ notebookPath: 'a.ipynb', action: 'edit', cell, settings: {}, instruction: ' use numpy ' }).instruction).toBe('use numpy');
  });
});

describe('compactOutputs', () => {
  it('keeps text, drops images and other rich data (naming them), clips long text', () => {
    const long = 'x'.repeat(MAX_OUTPUT_TEXT + 50);
    const out = compactOutputs([
      { output_type: 'stream', name: 'stdout', text: ['a\n', 'b\n'] },
      { output_type: 'display_data', data: { 'image/png': 'iVBORw0KGgo…'.repeat(1000), 'text/plain': '<Figure size 640x480>' }, metadata: {} },
      { output_type: 'execute_result', data: { 'text/plain': long }, execution_count: 3, metadata: {} },
    ]);
    expect(out[0]).toEqual({ output_type: 'stream', name: 'stdout', text: 'a\nb\n' });
    expect(out[1]).toEqual({ output_type: 'display_data', data: { 'text/plain': '<Figure size 640x480>' }, omitted_mime_types: ['image/png'] });
    const clipped = (out[2]!.data as Record<string, string>)['text/plain']!;
    expect(clipped.startsWith('x'.repeat(MAX_OUTPUT_TEXT))).toBe(true);
    expect(clipped).toMatch(/… \[50 more characters\]$/);
    expect(JSON.stringify(out)).not.toContain('iVBOR');
  });
});

describe('bridgeUrl', () => {
  it('addresses the bridge relative to the JupyterLab base URL', () => {
    expect(bridgeUrl('http://h:8080/jupyter/', 'edit')).toBe('http://h:8080/jupyter/codeagent-bridge/edit');
    expect(bridgeUrl('http://h:8080/jupyter', 'providers')).toBe('http://h:8080/jupyter/codeagent-bridge/providers');
  });
});

describe('requestEdit', () => {
  const req = buildEditRequest({ notebookPath: 'a.ipynb', action: 'fix', cell, settings: {} });

  it('POSTs the JSON body and returns the answer', async () => {
    let seen: { url: string; init: RequestInit } | undefined;
    const send: Send = (url, init) => {
      seen = { url, init };
      return Promise.resolve(jsonResponse(200, answer));
    };
    await expect(requestEdit(send, 'http://x/jupyter/codeagent-bridge/edit', req, 10)).resolves.toEqual(answer);
    expect(seen?.init.method).toBe('POST');
    expect(JSON.parse(seen?.init.body as string)).toEqual(req);
  });

  it('names cause and fix for each bridge failure', async () => {
    const fail = (status: number, body: unknown) => failureOf(requestEdit(() => Promise.resolve(jsonResponse(status, body)), 'u', req, 10));
    const down = await fail(502, { error: 'upstream_unreachable' });
    expect(down).toBeInstanceOf(BridgeRequestError);
    expect(down.message).toMatch(/not reachable.*opencode serve/s);
    expect((await fail(504, { error: 'upstream_timeout' })).message).toMatch(/did not answer within 10 s/);
    expect((await fail(502, { error: 'upstream_auth_failed' })).message).toMatch(/credentials/);
    expect((await fail(502, { error: 'upstream_error', status: 500 })).message).toMatch(/HTTP 500/);
    expect((await fail(401, { error: 'unauthorized' })).message).toMatch(/log in/i);
    expect((await fail(502, { error: 'bad_gateway' })).message).toMatch(/bridge is not reachable/);
    expect((await fail(200, { nothing: true })).kind).toBe('invalid_response');
  });

  it('gives up after the time-out', async () => {
    const never: Send = (_url, init) =>
      new Promise((_resolve, reject) => init.signal?.addEventListener('abort', () => reject(new DOMException('aborted', 'AbortError'))));
    // 5 s is the smallest allowed time-out: fake timers make it pass at once.
    vi.useFakeTimers();
    try {
      const p = failureOf(requestEdit(never, 'u', req, 5));
      await vi.advanceTimersByTimeAsync(5_000);
      const err = await p;
      expect(err.kind).toBe('timeout');
      expect(err.message).toMatch(/No answer within 5 s/);
    } finally {
      vi.useRealTimers();
    }
  });

  it('stops at once when the user cancels', async () => {
    const never: Send = (_url, init) =>
      new Promise((_resolve, reject) => init.signal?.addEventListener('abort', () => reject(new DOMException('aborted', 'AbortError'))));
    const cancel = new AbortController();
    const p = failureOf(requestEdit(never, 'u', req, 60, cancel.signal));
    cancel.abort();
    expect((await p).kind).toBe('cancelled');
  });

  it('reports a network failure', async () => {
    const err = await failureOf(requestEdit(async () => Promise.reject(new TypeError('Failed to fetch')), 'u', req, 10));
    expect(err.kind).toBe('network');
    expect(err.message).toMatch(/Failed to fetch/);
  });
});

describe('describeHttpFailure', () => {
  it('keeps the HTTP status', () => {
    expect(describeHttpFailure(418, null, 10).status).toBe(418);
  });
});

describe('every fix that sends the user to the settings names a place that exists', () => {
  it('says Settings › Settings Editor › Code agent bridge (the lab host has that menu, editor and entry)', () => {
    expect(SETTINGS_PLACE).toBe('Settings › Settings Editor › Code agent bridge');
    const fixes = ['upstream_unreachable', 'upstream_timeout', 'upstream_auth_failed', 'upstream_error', 'invalid_request'].map(
      (error) => describeHttpFailure(502, { error, status: 500 }, 30).fix,
    );
    fixes.push(describeHttpFailure(504, null, 30).fix);
    for (const fix of fixes) expect(fix).toContain(SETTINGS_PLACE);
    expect(fixes.join('\n')).not.toMatch(/in the settings|in Settings › Code agent bridge/);
  });
});

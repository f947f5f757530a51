import { describe, expect, it } from 'vitest';
import { resolveSettings, type BridgeEnvironment, type UserSettings } from './settings.js';
import { buildPrompt, cleanTraceback, extractCode } from './prompts.js';

const none: BridgeEnvironment = { url: undefined, user: undefined, password: undefined, allowedHosts: [] };
const env: BridgeEnvironment = { url: 'http://127.0.0.1:5000', user: 'env-user', password: 'env-pw', allowedHosts: ['agent.internal'] };

describe('settings resolution (SPEC §9.1)', () => {
  const cases: [string, UserSettings | undefined, BridgeEnvironment, Partial<ReturnType<typeof resolveSettings>>][] = [
    ['defaults', undefined, none, { url: 'http://127.0.0.1:4096', user: 'codeagent', password: '', provider: '', model: '', timeoutSeconds: 120 }],
    ['env URL over default', {}, env, { url: 'http://127.0.0.1:5000' }],
    ['user URL over env', { codeagentServerUrl: 'http://localhost:7000/' }, env, { url: 'http://localhost:7000' }],
    ['env user over user setting', { codeagentServerUser: 'me' }, env, { user: 'env-user' }],
    ['user setting when env is unset', { codeagentServerUser: 'me' }, none, { user: 'me' }],
    ['env password over user setting', { codeagentServerPassword: 'mine' }, env, { password: 'env-pw' }],
    ['user password when env is unset', { codeagentServerPassword: 'mine' }, none, { password: 'mine' }],
    ['provider and model', { codeagentProvider: 'p', codeagentModel: 'm' }, none, { provider: 'p', model: 'm' }],
    ['timeout bounds', { requestTimeoutSeconds: 5 }, none, { timeoutSeconds: 5 }],
    ['allowed non-loopback host', { codeagentServerUrl: 'https://agent.internal:4096' }, env, { url: 'https://agent.internal:4096' }],
    ['IPv6 loopback', { codeagentServerUrl: 'http://[::1]:4096' }, none, { url: 'http://[::1]:4096' }],
  ];
  it.each(cases)('%s', (_name, user, e, expected) => {
    expect(resolveSettings(user, e)).toMatchObject(expected);
  });
  it.each([
    [{ requestTimeoutSeconds: 4 }],
    [{ requestTimeoutSeconds: 601 }],
    [{ requestTimeoutSeconds: 10.5 }],
    [{ codeagentServerUrl: 'http://evil.example:4096' }],
    [{ codeagentServerUrl: 'ftp://127.0.0.1' }],
    [{ codeagentServerUrl: 'not a url' }],
    [{ codeagentServerUrl: 'http://10.0.0.1:4096' }],
  ] as [UserSettings][])('refuses %j with 400', (user) => {
    expect(() => resolveSettings(user, env)).toThrow(expect.objectContaining({ statusCode: 400, code: 'invalid_request' }));
  });
});

describe('prompts and code extraction', () => {
  it('extracts one fenced block with or without a language tag', () => {
    expect(extractCode('Sure:\n```python\nx = 1\n```\nDone.')).toEqual({ source: 'x = 1', explanation: 'Sure:\n\nDone.' });
    expect(extractCode('```\ny = 2\n```')?.source).toBe('y = 2');
  });
  it('takes the longest of several blocks and refuses replies without code', () => {
    expect(extractCode('```python\nimport pandas as pd\ndf = pd.read_csv("a.csv")\n```\nUse it like:\n```python\ndf\n```')?.source).toBe('import pandas as pd\ndf = pd.read_csv("a.csv")');
    expect(extractCode('no code here')).toBeUndefined();
    expect(extractCode('```python\n\n```')).toBeUndefined();
  });
  it('strips ANSI codes and trims long tracebacks', () => {
    const long = Array.from({ length: 2000 }, (_, i) => `\u001b[0;31mline ${i}\u001b[0m`);
    const text = cleanTraceback(long);
    expect(text).not.toContain('\u001b');
    expect(text.length).toBeLessThan(4100);
    expect(text).toContain('line 1999');
  });
  it('asks for one fenced block and carries the instruction', () => {
    const p = buildPrompt({ action: 'edit', notebookPath: 'a.ipynb', source: 'x', errors: [], instruction: 'add a docstring' });
    expect(p).toContain('exactly one fenced code block');
    expect(p).toContain('add a docstring');
  });
});

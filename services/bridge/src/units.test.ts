import { describe, expect, it } from 'vitest';
import { resolveSettings, type BridgeEnvironment, type UserSettings } from './settings.js';
import { buildPrompt, cleanTraceback, errorText, extractCode } from './prompts.js';

const none: BridgeEnvironment = { url: undefined, user: undefined, password: undefined, allowedHosts: [] };
const env: BridgeEnvironment = { url: 'http://127.0.0.1:5000', user: 'env-user', password: 'env-pw', allowedHosts: ['agent.internal'] };

describe('settings resolution (docs/contract/spec.md §9.1)', () => {
  const cases: [string, UserSettings | undefined, BridgeEnvironment, Partial<ReturnType<typeof resolveSettings>>][] = [
    ['defaults', undefined, none, { url: 'http://127.0.0.1:4096', user: 'codeagent', password: '', provider: '', model: '', timeoutSeconds: 120 }],
    ['env URL over default', {}, env, { url: 'http://127.0.0.1:5000' }],
    [
      'user URL with the origin of the env URL',
      { codeagentServerUrl: 'http://127.0.0.1:5000/' },
      env,
      { url: 'http://127.0.0.1:5000', user: 'env-user', password: 'env-pw' },
    ],
    ['another spelling of the env origin', { codeagentServerUrl: 'http://127.1:5000/?x=1#y' }, env, { url: 'http://127.0.0.1:5000', password: 'env-pw' }],
    ['user URL with the default origin when the env URL is unset', { codeagentServerUrl: 'http://127.0.0.1:4096' }, none, { url: 'http://127.0.0.1:4096' }],
    ['env user over user setting', { codeagentServerUser: 'me' }, env, { user: 'env-user' }],
    ['user setting when env is unset', { codeagentServerUser: 'me' }, none, { user: 'me' }],
    ['env password over user setting', { codeagentServerPassword: 'mine' }, env, { password: 'env-pw' }],
    ['user password when env is unset', { codeagentServerPassword: 'mine' }, none, { password: 'mine' }],
    ['provider and model', { codeagentProvider: 'p', codeagentModel: 'm' }, none, { provider: 'p', model: 'm' }],
    ['timeout bounds', { requestTimeoutSeconds: 5 }, none, { timeoutSeconds: 5 }],
    [
      'allowed host: never the server credentials',
      { codeagentServerUrl: 'https://agent.internal:4096' },
      env,
      { url: 'https://agent.internal:4096', user: 'codeagent', password: '' },
    ],
    [
      "allowed host: the user's own credentials",
      { codeagentServerUrl: 'https://agent.internal:4096', codeagentServerUser: 'me', codeagentServerPassword: 'mine' },
      env,
      { user: 'me', password: 'mine' },
    ],
    [
      'allowed host compared as a host (case, trailing dot)',
      { codeagentServerUrl: 'http://AGENT.Internal.:9000/' },
      env,
      { url: 'http://agent.internal.:9000' },
    ],
    [
      'a loopback host listed explicitly',
      { codeagentServerUrl: 'http://[::1]:7000' },
      { ...env, allowedHosts: ['[::1]'] },
      { url: 'http://[::1]:7000', password: '' },
    ],
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
    // no implicit loopback: another port, another spelling of the same machine, another scheme
    [{ codeagentServerUrl: 'http://127.0.0.1:5001' }],
    [{ codeagentServerUrl: 'http://127.0.0.1:22' }],
    [{ codeagentServerUrl: 'http://localhost:5000' }],
    [{ codeagentServerUrl: 'http://[::1]:5000' }],
    [{ codeagentServerUrl: 'http://0.0.0.0:5000' }],
    [{ codeagentServerUrl: 'https://127.0.0.1:5000' }],
    [{ codeagentServerUrl: 'http://127.0.0.1:4096' }],
    // credentials in the URL, and hosts that only look allowed
    [{ codeagentServerUrl: 'http://env-user:env-pw@127.0.0.1:5000' }],
    [{ codeagentServerUrl: 'http://agent.internal.evil.example' }],
    [{ codeagentServerUrl: 'http://evilagent.internal' }],
    [{ codeagentServerUrl: 'http://agent.internal@evil.example' }],
  ] as [UserSettings][])('refuses %j with 400', (user) => {
    expect(() => resolveSettings(user, env)).toThrow(expect.objectContaining({ statusCode: 400, code: 'invalid_request' }));
  });
  it('refuses loopback URLs when CODEAGENT_BRIDGE_URL is unset, except the default origin', () => {
    for (const url of ['http://127.0.0.1:4097', 'http://localhost:4096', 'http://[::1]:4096', 'http://127.0.0.2:4096']) {
      expect(() => resolveSettings({ codeagentServerUrl: url }, none), url).toThrow(expect.objectContaining({ statusCode: 400 }));
    }
  });
});

describe('prompts and code extraction', () => {
  it('extracts one fenced block with or without a language tag', () => {
    expect(extractCode('Sure:\n```python\nx = 1\n```\nDone.')).toEqual({ source: 'x = 1', explanation: 'Sure:\n\nDone.' });
    expect(extractCode('```\ny = 2\n```')?.source).toBe('y = 2');
  });
  it('takes the longest of several blocks and refuses replies without code', () => {
    expect(extractCode('```python\nimport pandas as pd\ndf = pd.read_csv("a.csv")\n```\nUse it like:\n```python\ndf\n```')?.source).toBe(
      'import pandas as pd\ndf = pd.read_csv("a.csv")',
    );
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
  it("keeps an error's message to its start: a prompt does not carry a megabyte of it", () => {
    const evalue = `\u001b[0;31mKeyError\u001b[0m ${'x'.repeat(1_000_000)}`;
    const p = buildPrompt({ action: 'fix', notebookPath: 'a.ipynb', source: 'x', errors: [{ ename: 'KeyError', evalue, traceback: [] }] });
    expect(p.length).toBeLessThan(10_000);
    expect(p).toContain('KeyError: KeyError xxx');
    expect(p).toMatch(/… \(\d+ more characters\)/);
    expect(errorText('short')).toBe('short');
  });
  it('asks for one fenced block and carries the instruction', () => {
    const p = buildPrompt({ action: 'edit', notebookPath: 'a.ipynb', source: 'x', errors: [], instruction: 'add a docstring' });
    expect(p).toContain('exactly one fenced code block');
    expect(p).toContain('add a docstring');
  });
});

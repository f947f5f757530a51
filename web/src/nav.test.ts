import { describe, expect, it } from 'vitest';
import { jupyterPath, loginPath, safeNext } from './nav';

describe('safeNext: the login page follows ?next= only to this app (no open redirect)', () => {
  const origin = 'https://platform.example';
  it.each(['/', '/workspaces/abc/files/a/', '/manage', '/jupyter/ws-1/lab?reset', '/workspaces/x/files/#top'])(
    'keeps the same-origin relative path %s',
    (p) => {
      expect(safeNext(p, origin)).toBe(p);
    },
  );
  it.each([
    'https://evil.example/',
    '//evil.example/path',
    '/\\evil.example',
    '\\\\evil.example',
    '/%5Cevil.example',
    'javascript:alert(1)',
    'JaVaScRiPt:alert(1)',
    'data:text/html,<script>alert(1)</script>',
    ' /workspaces',
    '/\t/evil.example',
    '/\n/evil.example',
    'evil.example',
    'http:/evil.example',
    '/api/v1/auth/logout',
    '/internal/v1/objects',
    '',
  ])('sends %j home', (p) => {
    const next = safeNext(p, origin);
    expect(next === '/' || !new URL(next, origin).host.includes('evil')).toBe(true);
    expect(new URL(next, origin).origin).toBe(origin);
  });
  it('refuses protocol-relative and absolute targets outright', () => {
    expect(safeNext('//evil.example', origin)).toBe('/');
    expect(safeNext('https://evil.example', origin)).toBe('/');
    expect(safeNext('/api/v1/auth/logout', origin)).toBe('/');
    expect(safeNext(null, origin)).toBe('/');
  });
  it('builds the login address with the way back', () => {
    expect(loginPath('/workspaces/a/files/')).toBe('/login?next=%2Fworkspaces%2Fa%2Ffiles%2F');
    expect(loginPath('/')).toBe('/login');
    expect(loginPath('//evil.example')).toBe('/login');
  });
});

describe('jupyterPath: the workspace JupyterLab, or a file opened in it', () => {
  it('is the lab root without a path', () => {
    expect(jupyterPath('7e5cea70-8f6d-40b2-b9f4-c75b19d741b4')).toBe('/jupyter/7e5cea70-8f6d-40b2-b9f4-c75b19d741b4/');
  });

  it("opens a file by its object path, each segment encoded (a name's ?, # and % stay in the name)", () => {
    expect(jupyterPath('ws', 'reports/weekly.ipynb')).toBe('/jupyter/ws/lab/tree/reports/weekly.ipynb');
    expect(jupyterPath('ws', 'a b/c?d#e%f.ipynb')).toBe('/jupyter/ws/lab/tree/a%20b/c%3Fd%23e%25f.ipynb');
    expect(jupyterPath('ws', 'über/ノート.ipynb')).toBe(`/jupyter/ws/lab/tree/${encodeURIComponent('über')}/${encodeURIComponent('ノート.ipynb')}`);
  });
});

import { describe, expect, it } from 'vitest';
import { buildGatewayApp } from './app.js';
import { safeNext } from './landing.js';

describe('the minimal login page (/login?next=…, issue 15 item 6)', () => {
  it('serves the form and its script as files, no inline script, framed by the platform only', async () => {
    const app = await buildGatewayApp({ upstreams: { backend: 'http://127.0.0.1:9', clusterAdmin: 'http://127.0.0.1:9', bridge: 'http://127.0.0.1:9' } });
    try {
      const page = await app.inject({ method: 'GET', url: '/login?next=%2Fjupyter%2Fx%2F' });
      expect(page.statusCode).toBe(200);
      expect(page.headers['content-type']).toMatch(/^text\/html/);
      expect(page.body).toContain('<script src="/login.js" defer></script>');
      expect(page.body).not.toMatch(/<script>(?!<)/);
      const csp = String(page.headers['content-security-policy']);
      expect(csp).toContain("script-src 'self'");
      expect(csp).not.toContain('unsafe-inline');
      const script = await app.inject({ method: 'GET', url: '/login.js' });
      expect(script.statusCode).toBe(200);
      expect(script.headers['content-type']).toMatch(/^text\/javascript/);
      expect(script.body).toContain('/api/v1/auth/login');
    } finally {
      await app.close();
    }
  });

  it('returns only to a path of this site', () => {
    expect(safeNext('/jupyter/1/lab?x=1')).toBe('/jupyter/1/lab?x=1');
    for (const bad of [
      '//evil.example/',
      '/\\evil.example',
      'https://evil.example/',
      'javascript:alert(1)',
      '',
      null,
      undefined,
      '/\t/evil.example',
      '/\n/evil.example',
      '/a\\..\\\\evil.example',
    ])
      expect(safeNext(bad)).toBe('/');
  });
});

import { describe, expect, it } from 'vitest';
import { labOriginOf, labWorkspaceOfHost, parseLabOrigins, type LabOrigins } from './lab-origin.js';

const WS = '0b0b0b0b-1111-4222-8333-444455556666';

describe('LAB_ORIGIN (decision 0263)', () => {
  it('turns a workspace into its lab origin and a host back into its workspace', () => {
    const labs = parseLabOrigins('https://{workspace}.Labs.Example-Labs.net:443', 'https://example.com/') as LabOrigins;
    expect(labs).toEqual({ protocol: 'https:', suffix: 'labs.example-labs.net', platform: 'https://example.com' });
    expect(labOriginOf(labs, WS.toUpperCase())).toBe(`https://${WS}.labs.example-labs.net`);
    expect(labWorkspaceOfHost(labs, `${WS}.labs.example-labs.net`)).toBe(WS);
    expect(labWorkspaceOfHost(labs, `${WS.toUpperCase()}.LABS.example-labs.net:443`)).toBe(WS);
    for (const host of [
      undefined,
      'example.com',
      'labs.example-labs.net',
      `${WS}.labs.example-labs.net:8443`,
      `x${WS}.labs.example-labs.net`,
      `a.${WS}.labs.example-labs.net`,
      `${WS}.labs.example-labs.net.evil.org`,
    ]) {
      expect(labWorkspaceOfHost(labs, host), String(host)).toBeUndefined();
    }
    const dev = parseLabOrigins('http://{workspace}.lab.localhost:8080', 'http://127.0.0.1:8080') as LabOrigins;
    expect(labWorkspaceOfHost(dev, `${WS}.lab.localhost:8080`)).toBe(WS);
    expect(labWorkspaceOfHost(dev, `${WS}.lab.localhost`)).toBeUndefined();
  });

  it('names what is wrong with the settings', () => {
    expect(parseLabOrigins(undefined, undefined)).toBeUndefined();
    const problems = (a: string, b?: string) => (parseLabOrigins(a, b) as { problems: string[] }).problems.join('\n');
    expect(problems('https://labs.example.com', 'https://example.com')).toMatch(/\{workspace\}\. as the first label/);
    expect(problems('https://x.{workspace}.example.com', 'https://example.com')).toMatch(/first label/);
    expect(problems('https://{workspace}.{workspace}.example.com', 'https://example.com')).toMatch(/once/);
    expect(problems('https://{workspace}.example.com/lab', 'https://example.com')).toMatch(/no path/);
    expect(problems('ftp://{workspace}.example.com', 'https://example.com')).toMatch(/scheme/);
    expect(problems('https://{workspace}.example.com')).toMatch(/needs PLATFORM_ORIGIN/);
    expect(problems('https://{workspace}.example.com', 'https://example.com/app')).toMatch(/PLATFORM_ORIGIN is not an origin/);
    expect(problems('https://{workspace}.example.com', `https://${WS}.example.com`)).toMatch(/one of the labs’ hosts/);
    // One site for cookies: a lab's page could set the platform's session cookie for the parent domain.
    for (const [lab, platform] of [
      ['https://{workspace}.labs.example.com', 'https://example.com'],
      ['https://{workspace}.labs.example.com', 'https://app.example.com'],
      ['https://{workspace}.example.com', 'https://www.example.com:8443'],
      ['http://{workspace}.lab.localhost:8080', 'http://localhost:8080'],
    ]) {
      expect(problems(lab!, platform), `${lab} ${platform}`).toMatch(/share a parent domain with PLATFORM_ORIGIN/);
    }
    expect(parseLabOrigins('http://{workspace}.lab.localhost:8080', 'http://127.0.0.1:8080')).not.toHaveProperty('problems');
    // The labs' cookies are Secure: plain http only under localhost.
    expect(problems('http://{workspace}.example-labs.net', 'https://example.com')).toMatch(/LAB_ORIGIN must be https/);
    expect(parseLabOrigins('https://{workspace}.example-labs.net', 'https://app.example.com')).not.toHaveProperty('problems');
  });
});

import { describe, expect, it } from 'vitest';
import { labOriginOf, labWorkspaceOfHost, parseLabOrigins, type LabOrigins } from './lab-origin.js';

const WS = '0b0b0b0b-1111-4222-8333-444455556666';

describe('LAB_ORIGIN (decision 0263)', () => {
  it('turns a workspace into its lab origin and a host back into its workspace', () => {
    const labs = parseLabOrigins('https://{workspace}.Labs.Example.com:443', 'https://example.com/') as LabOrigins;
    expect(labs).toEqual({ protocol: 'https:', suffix: 'labs.example.com', platform: 'https://example.com' });
    expect(labOriginOf(labs, WS.toUpperCase())).toBe(`https://${WS}.labs.example.com`);
    expect(labWorkspaceOfHost(labs, `${WS}.labs.example.com`)).toBe(WS);
    expect(labWorkspaceOfHost(labs, `${WS.toUpperCase()}.LABS.example.com:443`)).toBe(WS);
    for (const host of [
      undefined,
      'example.com',
      'labs.example.com',
      `${WS}.labs.example.com:8443`,
      `x${WS}.labs.example.com`,
      `a.${WS}.labs.example.com`,
      `${WS}.labs.example.com.evil.org`,
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
  });
});

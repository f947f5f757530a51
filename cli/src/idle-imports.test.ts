import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { componentExecArgv } from './supervisor.js';

const cliDir = fileURLToPath(new URL('..', import.meta.url));

/** The packages (under node_modules) a fresh Node process resolves while importing `specifier` and running `then`. */
function packagesLoadedBy(specifier: string, then = ''): string[] {
  const script = `
    import { registerHooks } from 'node:module';
    const seen = new Set();
    registerHooks({ resolve(spec, ctx, next) { const r = next(spec, ctx); const m = /node_modules\\/((?:@[^/]+\\/)?[^/]+)/.exec(r.url); if (m) seen.add(m[1]); return r; } });
    const mod = await import(${JSON.stringify(specifier)});
    ${then}
    console.log(JSON.stringify([...seen]));`;
  const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], {
    cwd: cliDir,
    encoding: 'utf8',
    env: { ...process.env, NODE_OPTIONS: '' },
  });
  return JSON.parse(out.trim().split('\n').at(-1)!) as string[];
}

// Idle memory (issue 17, decision 0085): what a component does not use until asked stays unloaded.
describe('what an idle component loads', () => {
  it('the storage package loads the AWS SDK only for an s3 store', () => {
    const local = packagesLoadedBy('@codeagent/storage', `await mod.createObjectStore({ storageBackend: 'local', localStorageBaseDir: '/nonexistent' });`);
    expect(local).not.toContain('@aws-sdk/client-s3');
    expect(local).not.toContain('@aws-sdk/lib-storage');
    const s3 = packagesLoadedBy(
      '@codeagent/storage',
      `await mod.createObjectStore({ storageBackend: 's3', s3: { buckets: { workspace: 'w', version: 'v', run_log: 'r', trash: 't' }, forcePathStyle: true } });`,
    );
    expect(s3).toContain('@aws-sdk/client-s3');
  });

  it('backend and worker do not load the AWS SDK, cluster-admin not the MCP SDK, at import', () => {
    for (const pkg of ['@codeagent/backend', '@codeagent/worker']) expect(packagesLoadedBy(pkg), pkg).not.toContain('@aws-sdk/client-s3');
    const clusterAdmin = packagesLoadedBy('@codeagent/cluster-admin');
    expect(clusterAdmin).toContain('fastify');
    expect(clusterAdmin).not.toContain('@modelcontextprotocol/sdk');
    expect(clusterAdmin).not.toContain('zod');
  });

  it('only the gateway loads undici at import; the outbound client of cluster-admin on its first request', () => {
    for (const pkg of ['@codeagent/bridge', '@codeagent/runtime', '@codeagent/cluster-admin', '@codeagent/backend', '@codeagent/worker'])
      expect(packagesLoadedBy(pkg), pkg).not.toContain('undici');
    expect(packagesLoadedBy('@codeagent/gateway')).toContain('undici');
    const made = packagesLoadedBy(
      '@codeagent/safe-fetch',
      `const c = mod.createOutboundClient(); await c.fetch('ftp://example.com/').catch(() => undefined); await c.close();`,
    );
    expect(made).not.toContain('undici');
    const used = packagesLoadedBy(
      '@codeagent/safe-fetch',
      `const c = mod.createOutboundClient(); await c.fetch('http://localhost:9/').catch((e) => { if (e.code !== 'address_blocked') throw e; }); await c.close();`,
    );
    expect(used).toContain('undici');
  });
});

describe('what the supervisor keeps loaded', () => {
  it('runs the embedded PostgreSQL and the migrations on pg alone: no Kysely, no component code', () => {
    const supervisor = packagesLoadedBy(new URL('../dist/supervisor.js', import.meta.url).href);
    expect(supervisor).toContain('pg');
    for (const pkg of ['kysely', 'fastify', 'undici', '@codeagent/backend']) expect(supervisor, pkg).not.toContain(pkg);
  });
});

describe('V8 settings of the components', () => {
  it('gives them 1 MiB semi-spaces, unless the operator set a size', () => {
    expect(componentExecArgv([], '')).toEqual(['--max-semi-space-size=1']);
    expect(componentExecArgv(['--enable-source-maps'], '')).toEqual(['--enable-source-maps', '--max-semi-space-size=1']);
    expect(componentExecArgv([], '--max-semi-space-size=8')).toEqual([]);
    expect(componentExecArgv(['--max_semi_space_size=4'], '')).toEqual(['--max_semi_space_size=4']);
  });
});

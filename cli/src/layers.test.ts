import { spawnSync } from 'node:child_process';
import { rmSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * The layer rule of eslint.config.js (docs/decisions/0096-one-way-layers-and-shared-rules.md),
 * on real files: probes are written into the packages and services, the real ESLint runs once
 * over them, and each probe's errors are read from its JSON report.
 */
const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const ESLINT = join(ROOT, 'node_modules', 'eslint', 'bin', 'eslint.js');
const tag = `layers-probe-${process.pid}`;

const probes = {
  storageImportsServiceKit: ['packages/storage/src', "import { NotFoundError } from '@codeagent/service-kit';\nexport const x = NotFoundError;\n"],
  storageImportsDb: ['packages/storage/src', "import type { DB } from '@codeagent/db';\nexport type X = DB;\n"],
  configImportsAService: ['packages/config/src', "import { startBackend } from '@codeagent/backend';\nexport const x = startBackend;\n"],
  gatewayImportsDb: ['services/gateway/src', "import { openDatabase } from '@codeagent/db';\nexport const x = openDatabase;\n"],
  gatewayImportsServiceKitRoot: ['services/gateway/src', "import { NotFoundError } from '@codeagent/service-kit';\nexport const x = NotFoundError;\n"],
  workerImportsBackend: ['services/worker/src', "import { startBackend } from '@codeagent/backend';\nexport const x = startBackend;\n"],
  // Allowed: the rule does not fire on these.
  storageImportsConfig: ['packages/storage/src', "import { loadConfig } from '@codeagent/config';\nexport const x = loadConfig;\n"],
  gatewayImportsHttpKit: ['services/gateway/src', "import { listen } from '@codeagent/service-kit/http';\nexport const x = listen;\n"],
  filesImportsDbAndKit: [
    'packages/files/src',
    "import type { DB } from '@codeagent/db';\nimport { NotFoundError } from '@codeagent/service-kit';\nexport type X = DB;\nexport const x = NotFoundError;\n",
  ],
} as const;
type Probe = keyof typeof probes;

const paths = Object.fromEntries(Object.entries(probes).map(([name, [dir]]) => [name, join(ROOT, dir, `${tag}-${name}.ts`)])) as Record<Probe, string>;
let messages: Record<Probe, { ruleId: string | null; message: string }[]>;

beforeAll(() => {
  for (const name of Object.keys(probes) as Probe[]) writeFileSync(paths[name], probes[name][1]);
  const res = spawnSync(process.execPath, [ESLINT, '--format', 'json', ...Object.values(paths)], { cwd: ROOT, encoding: 'utf8', timeout: 120_000 });
  const report = JSON.parse(res.stdout) as { filePath: string; messages: { ruleId: string | null; message: string }[] }[];
  messages = Object.fromEntries(
    (Object.keys(probes) as Probe[]).map((name) => [name, report.find((r) => r.filePath === paths[name])?.messages ?? []]),
  ) as typeof messages;
}, 120_000);

afterAll(() => {
  for (const p of Object.values(paths)) rmSync(p, { force: true });
});

const layerErrors = (name: Probe) => messages[name].filter((m) => m.ruleId === 'no-restricted-imports');

describe('the layer rule (no-restricted-imports in eslint.config.js)', () => {
  it.each([
    ['storageImportsServiceKit', '@codeagent/service-kit'],
    ['storageImportsDb', '@codeagent/db'],
    ['configImportsAService', '@codeagent/backend'],
    ['gatewayImportsDb', '@codeagent/db'],
    ['gatewayImportsServiceKitRoot', '@codeagent/service-kit'],
    ['workerImportsBackend', '@codeagent/backend'],
  ] as const)('%s: fails with no-restricted-imports naming the import and the decision', (name, imported) => {
    const errors = layerErrors(name);
    expect(errors, `${relative(ROOT, paths[name])}: ${JSON.stringify(messages[name])}`).toHaveLength(1);
    expect(errors[0]!.message).toContain(`'${imported}'`);
    expect(errors[0]!.message).toContain('layers:');
    expect(errors[0]!.message).toContain('docs/decisions/0096');
  });

  it.each(['storageImportsConfig', 'gatewayImportsHttpKit', 'filesImportsDbAndKit'] as const)('%s: allowed, no error', (name) => {
    expect(messages[name]).toEqual([]);
  });
});

import { spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '@codeagent/db';
import { CLI, freePort } from './testing.js';

/**
 * A start-up failure is one line on stderr that names the setting and the fix, with no stack
 * trace unless LOG_LEVEL=debug. The AWS SDK looks for credentials only in the environment and
 * the files under HOME here (no instance metadata service), so nothing leaves the machine.
 */
async function codeagent(args: string[], env: NodeJS.ProcessEnv): Promise<{ code: number | null; stderr: string; stdout: string }> {
  const base: NodeJS.ProcessEnv = { ...process.env };
  for (const name of Object.keys(base)) if (name.startsWith('AWS_') || name.startsWith('S3_')) delete base[name];
  const child = spawn(process.execPath, [CLI, ...args], {
    env: {
      ...base,
      HOME: mkdtempSync(join(tmpdir(), 'codeagent-home-')),
      AWS_EC2_METADATA_DISABLED: 'true',
      DATA_DIR: mkdtempSync(join(tmpdir(), 'codeagent-startup-')),
      LOG_LEVEL: 'warn',
      BACKEND_PORT: String(await freePort()),
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  return { code, stdout, stderr };
}

const STACK_FRAME = /^\s+at .*:\d+:\d+\)?$/m;

function expectOneLine(stderr: string, who: string): string {
  const lines = stderr.trim().split('\n');
  expect(lines, stderr).toHaveLength(1);
  expect(lines[0]).toMatch(new RegExp(`^${who}: `));
  expect(stderr).not.toMatch(STACK_FRAME);
  return lines[0]!;
}

describe('start-up failures: one line that names the setting and the fix', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase('embedded');
  });
  afterAll(async () => {
    await db?.drop();
  });

  it('STORAGE_BACKEND=s3 without credentials names S3_ACCESS_KEY_ID and S3_SECRET_ACCESS_KEY (backend and worker)', async () => {
    for (const component of ['backend', 'worker']) {
      const { code, stderr } = await codeagent([component], { DATABASE_URL: db.url, STORAGE_BACKEND: 's3' });
      expect(code).toBe(1);
      const line = expectOneLine(stderr, `codeagent ${component}`);
      expect(line).toContain('S3_ACCESS_KEY_ID and S3_SECRET_ACCESS_KEY');
      expect(line).toContain('STORAGE_BACKEND=local');
      expect(line).not.toContain('CredentialsProviderError');
    }
  });

  it('an S3_ENDPOINT that refuses connections is named with the settings to correct', async () => {
    const port = await freePort();
    const { code, stderr } = await codeagent(['backend'], {
      DATABASE_URL: db.url,
      STORAGE_BACKEND: 's3',
      S3_ENDPOINT: `http://127.0.0.1:${port}`,
      S3_ACCESS_KEY_ID: 'S3RVER',
      S3_SECRET_ACCESS_KEY: 'not-a-real-secret-value',
      S3_FORCE_PATH_STYLE: 'true',
    });
    expect(code).toBe(1);
    const line = expectOneLine(stderr, 'codeagent backend');
    expect(line).toContain(`cannot reach S3_ENDPOINT http://127.0.0.1:${port}`);
    expect(line).toContain('ECONNREFUSED');
    expect(line).toContain('S3_ENDPOINT and S3_REGION');
    expect(line).not.toContain('not-a-real-secret-value');
  });

  it('half of the S3 credentials is a settings error naming the missing one', async () => {
    const { code, stderr } = await codeagent(['backend'], { DATABASE_URL: db.url, STORAGE_BACKEND: 's3', S3_ACCESS_KEY_ID: 'only-the-id' });
    expect(code).toBe(78);
    expect(stderr).toContain('S3_SECRET_ACCESS_KEY is missing');
    expect(stderr).not.toMatch(STACK_FRAME);
  });

  it('an unreachable DATABASE_URL is named once, by migrate and by a component, without ECONNREFUSED stack traces', async () => {
    const port = await freePort();
    const url = `postgres://codeagent:hunter2-secret@127.0.0.1:${port}/codeagent`;
    // Each waits 10 s for the server to come up (openPlatformDatabase) before it gives up: both at once.
    const commands = ['migrate', 'backend'];
    const answers = await Promise.all(commands.map((command) => codeagent([command], { DATABASE_URL: url, STORAGE_BACKEND: 'local' })));
    for (const [i, command] of commands.entries()) {
      const { code, stderr } = answers[i]!;
      expect(code, stderr).toBe(1);
      const line = expectOneLine(stderr, `codeagent ${command}`);
      expect(line).toContain('DATABASE_URL');
      expect(line).toMatch(/start that PostgreSQL server or correct DATABASE_URL/);
      expect(line.match(/ECONNREFUSED/g) ?? []).toHaveLength(1);
      expect(line).not.toContain('hunter2-secret');
    }
  }, 60_000);

  it('`codeagent backend` alone (no DATABASE_URL, no `codeagent start`) says to start the platform or set DATABASE_URL', async () => {
    const { code, stderr } = await codeagent(['backend'], { DATABASE_URL: '', STORAGE_BACKEND: 'local' });
    expect(code).toBe(1);
    const line = expectOneLine(stderr, 'codeagent backend');
    expect(line).toContain('codeagent start');
    expect(line).toContain('DATABASE_URL');
  });

  it('LOG_LEVEL=debug shows the stack trace', async () => {
    const port = await freePort();
    const { code, stderr } = await codeagent(['migrate'], { DATABASE_URL: `postgres://codeagent@127.0.0.1:${port}/codeagent`, LOG_LEVEL: 'debug' });
    expect(code).toBe(1);
    expect(stderr).toContain('DATABASE_URL');
    expect(stderr).toMatch(STACK_FRAME);
  });
});

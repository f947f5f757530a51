import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stripVTControlCharacters } from 'node:util';
import { describe, expect, it } from 'vitest';
import { CLI, componentsOf, freePort, platformPorts, waitFor } from './testing.js';

const hasScript = spawnSync('script', ['--version']).status === 0;

/**
 * Runs `codeagent gateway`, on a pseudo-terminal (`script` of util-linux) or on pipes, sends one
 * request carrying secrets in its query and headers, and returns what the gateway printed.
 */
async function gatewayOutput(onTerminal: boolean, env: NodeJS.ProcessEnv = {}): Promise<string> {
  const port = await freePort();
  const childEnv = { ...process.env, DATA_DIR: mkdtempSync(join(tmpdir(), 'codeagent-logs-')), PORT: String(port), LOG_LEVEL: 'info', LOG_FORMAT: '', ...env };
  const command = `exec ${JSON.stringify(process.execPath)} ${JSON.stringify(CLI)} gateway`;
  const child = onTerminal
    ? spawn('script', ['-qec', command, '/dev/null'], { env: childEnv, stdio: ['pipe', 'pipe', 'pipe'], detached: true })
    : spawn(process.execPath, [CLI, 'gateway'], { env: childEnv, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  let out = '';
  child.stdout.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr.on('data', (c: Buffer) => (out += c.toString()));
  const exited = new Promise((resolve) => child.once('exit', resolve));
  try {
    await waitFor(() => out.includes('Server listening'), 'the gateway to listen', 20_000);
    const res = await fetch(`http://127.0.0.1:${port}/jupyter/api/sessions?token=tok-QUERY-secret&page=2`, {
      headers: { authorization: 'Bearer tok-AUTH-secret', cookie: 'codeagent_session=tok-COOKIE-secret', 'x-request-id': 'logs-test-1' },
    });
    await res.body?.cancel();
    await waitFor(() => out.includes('logs-test-1'), 'the access line', 10_000);
  } finally {
    process.kill(-child.pid!, 'SIGTERM'); // the group this test started: script and the gateway
    await exited;
  }
  return out;
}

const SECRETS = ['tok-QUERY-secret', 'tok-AUTH-secret', 'tok-COOKIE-secret'];

describe('what a component prints: pretty on a terminal, JSON otherwise, secrets never', () => {
  it.skipIf(!hasScript)('on a terminal: readable lines with time, level, component, request id and request', async () => {
    const colored = await gatewayOutput(true);
    expect(colored).not.toBe(stripVTControlCharacters(colored)); // colored: a terminal
    const out = stripVTControlCharacters(colored);
    for (const secret of SECRETS) expect(out).not.toContain(secret);
    expect(out).not.toContain('{"level"');
    expect(out).toMatch(/\[\d\d:\d\d:\d\d\.\d{3}\] INFO: gateway \[logs-test-1\] request GET \/jupyter\/api\/sessions\?token=\[redacted\]&page=2/);
  });

  it.skipIf(!hasScript)('on a terminal with LOG_FORMAT=json: JSON lines, secrets redacted', async () => {
    const out = await gatewayOutput(true, { LOG_FORMAT: 'json' });
    for (const secret of SECRETS) expect(out).not.toContain(secret);
    const line = out.split(/\r?\n/).find((l) => l.includes('logs-test-1'))!;
    expect(JSON.parse(line)).toMatchObject({ name: 'gateway', reqId: 'logs-test-1', url: '/jupyter/api/sessions?token=[redacted]&page=2' });
  });

  it('not on a terminal: JSON lines by default, and pretty when LOG_FORMAT=pretty', async () => {
    const json = await gatewayOutput(false);
    for (const secret of SECRETS) expect(json).not.toContain(secret);
    for (const line of json.trim().split('\n')) expect(() => JSON.parse(line) as unknown, line).not.toThrow();
    const pretty = await gatewayOutput(false, { LOG_FORMAT: 'pretty' });
    for (const secret of SECRETS) expect(pretty).not.toContain(secret);
    expect(pretty).toMatch(/^\[\d\d:\d\d:\d\d\.\d{3}\] INFO: gateway \[logs-test-1\] request GET /m);
  });

  it.skipIf(!hasScript)(
    '`codeagent start` on a terminal: the components of one request print readable lines with its request id',
    async () => {
      const dataDir = mkdtempSync(join(tmpdir(), 'codeagent-logs-start-'));
      const ports = await platformPorts();
      const env = {
        ...process.env,
        DATA_DIR: dataDir,
        LOG_LEVEL: 'info',
        LOG_FORMAT: '',
        STORAGE_BACKEND: 'local',
        DATABASE_URL: '',
        ...Object.fromEntries(Object.entries(ports).map(([k, v]) => [k, String(v)])),
      };
      const child = spawn('script', ['-qec', `exec ${JSON.stringify(process.execPath)} ${JSON.stringify(CLI)} start`, '/dev/null'], {
        env,
        stdio: ['pipe', 'pipe', 'pipe'],
        detached: true,
      });
      let colored = '';
      child.stdout.on('data', (c: Buffer) => (colored += c.toString()));
      child.stderr.on('data', (c: Buffer) => (colored += c.toString()));
      const exited = new Promise((resolve) => child.once('exit', resolve));
      try {
        await waitFor(() => colored.includes('codeagent is running at'), 'the platform to start', 120_000);
        const res = await fetch(`http://127.0.0.1:${ports.PORT}/api/v1/health?access_token=tok-START-secret`, {
          headers: { 'x-request-id': 'logs-start-1', cookie: 'codeagent_session=tok-START-cookie' },
        });
        expect(res.status).toBe(200);
        await waitFor(() => /gateway \[logs-start-1\] request GET/.test(stripVTControlCharacters(colored)), 'the access line', 10_000);
      } finally {
        process.kill(-child.pid!, 'SIGTERM');
        await exited;
      }
      const out = stripVTControlCharacters(colored);
      expect(out).not.toContain('tok-START');
      expect(out).not.toContain('{"level"');
      expect(out).toMatch(/^\[\d\d:\d\d:\d\d\.\d{3}\] INFO: backend \[logs-start-1\] incoming request GET \/api\/v1\/health\?access_token=\[redacted\]/m);
      expect(out).toMatch(/^\[\d\d:\d\d:\d\d\.\d{3}\] INFO: gateway \[logs-start-1\] request GET \/api\/v1\/health\?access_token=\[redacted\] 200 /m);
      await waitFor(() => componentsOf(dataDir).length === 0, 'the platform processes to exit', 20_000);
    },
    180_000,
  );

  it('refuses an unknown LOG_FORMAT, naming the allowed values', () => {
    const result = spawnSync(process.execPath, [CLI, 'gateway'], {
      env: { ...process.env, DATA_DIR: mkdtempSync(join(tmpdir(), 'codeagent-logs-')), LOG_FORMAT: 'colour' },
      encoding: 'utf8',
    });
    expect(result.status).toBe(78);
    expect(result.stderr).toContain('LOG_FORMAT="colour" is not one of auto, json, pretty');
  });
});

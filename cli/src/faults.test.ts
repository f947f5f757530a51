import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { CLI, componentsOf, freePort, postmasterOf, startPlatform, waitFor } from './testing.js';

/** A start either succeeds for real or stops everything it started and says why in one line. */
describe('codeagent start: failed starts leave nothing behind', () => {
  const cleanups: (() => void)[] = [];
  afterAll(() => cleanups.forEach((c) => c()));

  const expectNothingLeft = async (dataDir: string) => {
    await waitFor(() => componentsOf(dataDir).length === 0, 'the platform processes to exit', 20_000);
    expect(postmasterOf(dataDir)).toBeUndefined();
    expect(existsSync(join(dataDir, 'codeagent.pid'))).toBe(false);
  };
  const expectOneLineReason = (out: string) => {
    expect(out).not.toContain('codeagent is running at');
    expect(out).not.toMatch(/health:\s+ok/);
    expect(out).not.toMatch(/^\s+at .*\(.*:\d+:\d+\)$/m); // no stack trace
  };

  it('a taken port: names the setting, starts nothing, and never reports the other program as healthy', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'codeagent-port-'));
    const port = await freePort();
    const squatter: Server = createServer((s) => s.end('HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\r\n{"status":"ok","checks":{}}'));
    await new Promise<void>((r) => squatter.listen(port, '127.0.0.1', r));
    cleanups.push(() => squatter.close());
    const platform = await startPlatform(dataDir, { PORT: String(port) }, false);
    expect(await platform.exited).toBe(1);
    const out = platform.output();
    expect(out).toContain(`port ${port} on 127.0.0.1 (PORT) is already in use`);
    expect(out).not.toContain('EADDRINUSE');
    expectOneLineReason(out);
    await expectNothingLeft(dataDir);
  });

  it('a component that cannot start stops everything already started, the gateway included', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'codeagent-fail-'));
    const closed = await freePort();
    // The backend and the worker cannot reach this S3 endpoint (nothing listens there).
    const platform = await startPlatform(
      dataDir,
      {
        STORAGE_BACKEND: 's3',
        S3_ENDPOINT: `http://127.0.0.1:${closed}`,
        S3_REGION: 'us-east-1',
        S3_ACCESS_KEY_ID: 'x',
        S3_SECRET_ACCESS_KEY: 'y',
        S3_FORCE_PATH_STYLE: 'true',
      },
      false,
    );
    expect(await platform.exited).toBe(1);
    const out = platform.output();
    expect(out).toMatch(/(backend|worker) could not start/);
    expect(out).toContain('the platform did not start; everything it had started is stopped');
    expectOneLineReason(out);
    await expectNothingLeft(dataDir);
    const gateway = await fetch(`${platform.url}/api/v1/health`).catch((err: Error) => err);
    expect(gateway).toBeInstanceOf(Error); // nothing listens: no orphan gateway answering 502
  }, 120_000);

  it('a DATA_DIR that cannot be created: one line naming the directory', () => {
    const file = join(mkdtempSync(join(tmpdir(), 'codeagent-notdir-')), 'a-file');
    writeFileSync(file, '');
    const res = spawnSync(process.execPath, [CLI, 'start'], { env: { ...process.env, DATA_DIR: `${file}/data` }, encoding: 'utf8', timeout: 30_000 });
    expect(res.status).toBe(78);
    expect(res.stderr).toContain(`DATA_DIR="${file}/data" cannot be used: a parent is missing or is not a directory`);
    expect(res.stderr.trim().split('\n')).toHaveLength(2); // "invalid settings:" and the one problem
  });

  it.runIf(process.getuid?.() === 0)(
    'a full disk: the message names the directory and the fix',
    async () => {
      const dataDir = mkdtempSync(join(tmpdir(), 'codeagent-full-'));
      // 8 MiB: enough for the secrets, not for a PostgreSQL cluster.
      const mounted = spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=8m,mode=0700', 'codeagent-test-full', dataDir]);
      expect(mounted.status, String(mounted.stderr)).toBe(0);
      cleanups.push(() => spawnSync('umount', ['-l', dataDir]));
      const platform = await startPlatform(dataDir, {}, false);
      expect(await platform.exited).toBe(1);
      const out = platform.output();
      expect(out).toContain(dataDir);
      expect(out).toMatch(/disk is full; free space or choose another DATA_DIR/);
      expectOneLineReason(out);
      await expectNothingLeft(dataDir);
    },
    120_000,
  );

  it('refuses to start over data of the earlier embedded engine (PGlite) and says what to do', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'codeagent-legacy-'));
    mkdirSync(join(dataDir, 'pgdata'));
    const platform = await startPlatform(dataDir, {}, false);
    expect(await platform.exited).toBe(1);
    expect(platform.output()).toMatch(/pgdata holds the data of the earlier embedded database \(PGlite\).*import-pglite/);
    expect(existsSync(join(dataDir, 'postgres'))).toBe(false); // never started empty over it
    await expectNothingLeft(dataDir);
    rmSync(dataDir, { recursive: true, force: true });
  });
});

// What a sandbox's code can put where the platform reaches into it (decision 0253).
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execFileSync } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectInside, pinSocket, readInside, SandboxPathError } from './inside.js';

describe('reaching into a sandbox', () => {
  let dir: string;
  let server: Server;
  let reached = 0;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'inside-'));
    mkdirSync(join(dir, 'run'));
    server = createServer((s) => {
      reached++;
      s.end('hello');
    });
    await new Promise<void>((r) => server.listen(join(dir, 'host.sock'), r));
    writeFileSync(join(dir, 'host-secret'), 'root:*:secret');
    writeFileSync(join(dir, 'run', 'kernel.json'), '{"ok": true}');
    writeFileSync(join(dir, 'run', 'big.json'), 'x'.repeat(5000));
    symlinkSync(join(dir, 'host-secret'), join(dir, 'run', 'secret-link'));
    symlinkSync(join(dir, 'host.sock'), join(dir, 'run', 'socket-link'));
    execFileSync('mkfifo', [join(dir, 'run', 'fifo')]);
  });
  afterAll(async () => {
    await new Promise((r) => server.close(r));
    rmSync(dir, { recursive: true, force: true });
  });

  it('reads a regular file; refuses a symlink, a FIFO (without waiting on it) and a file too large', async () => {
    expect(await readInside(join(dir, 'run', 'kernel.json'), 4096)).toBe('{"ok": true}');
    await expect(readInside(join(dir, 'run', 'secret-link'), 4096)).rejects.toThrow(SandboxPathError);
    await expect(readInside(join(dir, 'run', 'secret-link'), 4096)).rejects.toThrow(/symlink/);
    await expect(readInside(join(dir, 'run', 'fifo'), 4096)).rejects.toThrow(/not a regular file/);
    await expect(readInside(join(dir, 'run', 'big.json'), 4096)).rejects.toThrow(/larger than 4096 bytes/);
    await expect(readInside(join(dir, 'run', 'missing'), 4096)).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('connects to a socket as it was opened; never through a symlink, never to anything else', async () => {
    const answer = await new Promise<string>((resolve, reject) => {
      let text = '';
      const s = connectInside(join(dir, 'host.sock'));
      s.on('data', (c: Buffer) => (text += c.toString()));
      s.on('end', () => resolve(text));
      s.on('error', reject);
    });
    expect(answer).toBe('hello');
    expect(reached).toBe(1);
    for (const path of ['socket-link', 'kernel.json', 'fifo', 'missing']) {
      const err = await new Promise<Error>((resolve) => connectInside(join(dir, 'run', path)).on('error', resolve));
      expect(err.message, path).toMatch(/symlink|not a socket|ENOENT/);
    }
    expect(() => pinSocket(join(dir, 'run', 'socket-link'))).toThrow(SandboxPathError);
    expect(reached).toBe(1);
  });
});

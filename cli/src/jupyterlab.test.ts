import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, readlinkSync } from 'node:fs';
import { commandLine, descendants } from '@codeagent/sandbox';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CLI, freePort } from './testing.js';

// Needs the built host (`node extensions/build.mjs`, run by `npm test`) and Debian's Jupyter
// packages; without them it fails with the reason.
describe('codeagent jupyterlab', () => {
  it('serves JupyterLab under /jupyter/ with the configured token only, and stops on SIGTERM', async () => {
    const port = await freePort();
    const token = 'cli-test-jupyter-token';
    const child = spawn(process.execPath, [CLI, 'jupyterlab'], {
      env: {
        ...process.env,
        DATA_DIR: mkdtempSync(join(tmpdir(), 'codeagent-jl-')),
        JUPYTERLAB_PORT: String(port),
        JUPYTERLAB_TOKEN: token,
        LOG_LEVEL: 'warn',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout?.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr?.on('data', (c: Buffer) => (out += c.toString()));
    const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
    try {
      const url = `http://127.0.0.1:${port}/jupyter/`;
      const deadline = Date.now() + 60_000;
      let page: Response | undefined;
      while (Date.now() < deadline && child.exitCode === null) {
        page = await fetch(`${url}lab`, { headers: { authorization: `token ${token}` } }).catch(() => undefined);
        if (page?.ok) break;
        await new Promise((r) => setTimeout(r, 250));
      }
      expect(page?.status, out).toBe(200);
      const html = await page!.text();
      expect(html).toContain('jupyter-config-data');
      expect(html).toContain('jupyterlab-codeagent-bridge');
      expect(html).not.toContain(token);
      const anonymous = await fetch(`${url}api/contents`);
      expect(anonymous.status).toBe(403);
      expect((await fetch(`${url}api/contents`, { headers: { authorization: 'token wrong' } })).status).toBe(403);

      // The server and its kernels run in the sandbox: another uid (as root), other namespaces,
      // and the token the gateway uses is nowhere inside (the inner server has its own).
      const kernel = await fetch(`${url}api/kernels`, {
        method: 'POST',
        headers: { authorization: `token ${token}`, 'content-type': 'application/json' },
        body: '{"name":"python3"}',
      });
      expect(kernel.status, await kernel.clone().text()).toBe(201);
      const inside = descendants(child.pid!).filter((pid) => {
        const argv = commandLine(pid) ?? [];
        return argv[0] === '/usr/bin/python3' && (argv[1]?.endsWith('main.py') || argv[2] === 'ipykernel_launcher');
      });
      expect(inside.length).toBe(2);
      for (const pid of inside) {
        const status = readFileSync(`/proc/${pid}/status`, 'utf8');
        if (process.getuid?.() === 0) expect(/^Uid:\s+(\d+)/m.exec(status)![1]).toBe('1900000000');
        expect(readlinkSync(`/proc/${pid}/ns/net`)).not.toBe(readlinkSync('/proc/self/ns/net'));
        expect(readlinkSync(`/proc/${pid}/ns/mnt`)).not.toBe(readlinkSync('/proc/self/ns/mnt'));
        expect(readFileSync(`/proc/${pid}/environ`, 'utf8')).not.toContain(token);
        expect((commandLine(pid) ?? []).join(' ')).not.toMatch(/token/i);
      }
    } finally {
      child.kill('SIGTERM');
    }
    expect(await exited).toBe(0);
  }, 90_000);
});

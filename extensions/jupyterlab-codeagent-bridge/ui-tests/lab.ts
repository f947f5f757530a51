// What the browser tests share: the JupyterLab host as the platform runs it, and small helpers.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { request } from 'node:http';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort } from '@codeagent/service-kit/http';

const here = fileURLToPath(new URL('.', import.meta.url));
export const root = resolve(here, '../../..');
export const labextensions = resolve(root, 'extensions/jupyterlab-codeagent-bridge/labextension');
export const CHROMIUM = '/usr/bin/chromium';
export const CHROMIUM_ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'];

/** Fails with the reasons (never skips: CI must run the browser tests) when something they need is missing. */
export function assertLabPrerequisites(): void {
  const missing = [
    [resolve(root, 'extensions/lab-host/build/static/index.html'), 'the lab host is not built: run `node extensions/build.mjs`'],
    [join(labextensions, 'jupyterlab-codeagent-bridge/package.json'), 'the extension is not built: run `node extensions/build.mjs`'],
    [resolve(root, 'cli/dist/index.js'), 'the CLI is not built: run `npm run build`'],
    [CHROMIUM, 'Debian chromium is missing: run .ci/system-deps'],
    ['/usr/lib/python3/dist-packages/jupyterlab_server', 'python3-jupyterlab-server is missing: run .ci/system-deps'],
  ].filter(([p]) => !existsSync(p!));
  if (missing.length > 0) throw new Error(missing.map(([, why]) => why).join('\n'));
}

/** A free port for a component a test starts (decision 0196: below the kernel's ephemeral range). */
export { freePort };

/** A one-code-cell notebook with a Python 3 kernelspec. */
export function notebook(source: string): string {
  return JSON.stringify({
    cells: [{ cell_type: 'code', execution_count: null, id: 'cell-1', metadata: {}, outputs: [], source: source.split(/(?<=\n)/) }],
    metadata: { kernelspec: { display_name: 'Python 3', language: 'python', name: 'python3' } },
    nbformat: 4,
    nbformat_minor: 5,
  });
}

export interface LabProcess {
  child: ChildProcess;
  log: () => string;
}

/**
 * The JupyterLab host as the platform runs it: `codeagent jupyterlab`, whose server and kernels run
 * inside the kernel sandbox behind a token-checking proxy on `port` (notebooks in DATA_DIR/notebooks).
 */
export async function startJupyter(port: number, dataDir: string, token: string): Promise<LabProcess> {
  const child = spawn(process.execPath, [resolve(root, 'cli/dist/index.js'), 'jupyterlab'], {
    env: { ...process.env, DATA_DIR: dataDir, JUPYTERLAB_PORT: String(port), JUPYTERLAB_TOKEN: token, LOG_LEVEL: 'warn', PYDEVD_DISABLE_FILE_VALIDATION: '1' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout?.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr?.on('data', (c: Buffer) => (out += c.toString()));
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`the JupyterLab host exited:\n${out}`);
    if (Date.now() > deadline) throw new Error(`the JupyterLab host did not start in 30 s:\n${out}`);
    try {
      const r = await fetch(`http://127.0.0.1:${port}/jupyter/api/status`, { headers: { authorization: `token ${token}` } });
      if (r.ok) break;
    } catch {
      /* not up yet */
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  return { child, log: () => out };
}

/** The status of a websocket upgrade request (101 when accepted), bounded to 10 s. */
export function upgradeStatus(base: string, path: string, headers: Record<string, string> = {}): Promise<number> {
  const url = new URL(path, base);
  return new Promise((resolvePromise, reject) => {
    const req = request({
      host: url.hostname,
      port: url.port,
      path: url.pathname,
      agent: false,
      timeout: 10_000,
      headers: {
        connection: 'Upgrade',
        upgrade: 'websocket',
        'sec-websocket-version': '13',
        'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==',
        origin: url.origin,
        ...headers,
      },
    });
    req.on('upgrade', (_res, socket) => {
      socket.destroy();
      resolvePromise(101);
    });
    req.on('response', (res) => {
      res.resume();
      resolvePromise(res.statusCode ?? 0);
    });
    req.on('timeout', () => req.destroy(new Error(`no answer to the upgrade of ${path} within 10 s`)));
    req.on('error', reject);
    req.end();
  });
}

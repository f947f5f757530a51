import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, lchownSync, mkdirSync, readdirSync, lstatSync } from 'node:fs';
import { createServer, request, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Config } from '@codeagent/config';
import { SANDBOX_EXTENSIONS_DIR, SANDBOX_LAB_DIR, answerOwnLabPath, labAnswerHeaders, pluginSchemas, settingsCheck } from '@codeagent/runtime/lab-answers';
import { carriesToken, relayRequest, relayUpgrade } from '@codeagent/runtime/relay';
import { prepareSandbox, type Sandbox } from '@codeagent/sandbox';
import { connectInside } from '@codeagent/sandbox/inside';

const HOST_DIR = fileURLToPath(new URL('../../extensions/lab-host/', import.meta.url));
// The runtime's codeagent_nodelay module (TCP no-delay on kernel websockets), imported by main.py.
const NODELAY_DIR = fileURLToPath(new URL('../../services/runtime/python/', import.meta.url));
const LABEXTENSIONS = fileURLToPath(new URL('../../extensions/jupyterlab-codeagent-bridge/labextension/', import.meta.url));
// The interpreter must see Debian's jupyter_server and jupyterlab_server (as for the runtime).
const PYTHON = process.env.JUPYTER_PYTHON ?? '/usr/bin/python3';
const BASE_URL = '/jupyter/';
const PY_DIR = '/opt/codeagent/python';

/** Why the JupyterLab host cannot start here, or null when it can. */
export function jupyterlabMissing(): string | null {
  if (!existsSync(join(HOST_DIR, 'build', 'static', 'index.html'))) return 'the JupyterLab host is not built: run `node extensions/build.mjs`';
  if (!existsSync(PYTHON)) return `${PYTHON} is missing: install python3 and the Jupyter packages (scripts/system-deps.sh kernels)`;
  return null;
}

/** Gives the notebooks directory to the sandbox uid (root mode), without following symbolic links. */
function chownTree(dir: string, uid: number, depth = 0): void {
  lchownSync(dir, uid, uid);
  if (depth > 64) return;
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    const st = lstatSync(p);
    if (st.isDirectory()) chownTree(p, uid, depth + 1);
    else lchownSync(p, uid, uid);
  }
}

/**
 * `codeagent jupyterlab`: the JupyterLab host (Debian's jupyter_server + jupyterlab_server) with
 * the bridge extension, under `/jupyter/`, notebooks in DATA_DIR/notebooks. The whole server
 * runs inside a sandbox of the kernel sandbox (`@codeagent/sandbox`): its kernels (ZMQ ipc) and
 * anything they start see neither the platform nor the machine. It listens on a Unix socket
 * inside the sandbox; a small proxy on 127.0.0.1:JUPYTERLAB_PORT checks the token the gateway
 * injects (JUPYTERLAB_TOKEN) and swaps it for the inner server's own random token, so no
 * platform-derived secret is inside the sandbox. Resolves once it answers; SIGTERM stops it.
 */
export async function startJupyterlab(config: Config): Promise<string> {
  const missing = jupyterlabMissing();
  if (missing) throw new Error(missing);
  const notebooks = join(config.dataDir, 'notebooks');
  mkdirSync(notebooks, { recursive: true });
  const prepared = await prepareSandbox({ enabled: config.sandbox.enabled, uidBase: config.sandbox.uidBase, cgroupParent: config.sandbox.cgroupParent });
  for (const w of prepared.warnings) console.error(`codeagent jupyterlab: WARNING: ${w}`);
  if (prepared.mode === 'off') return startUnsandboxed(config, notebooks);
  for (const n of prepared.notes) console.error(`codeagent jupyterlab: ${n}`);

  const uid = config.sandbox.uidBase;
  if (prepared.mode === 'root') chownTree(notebooks, uid);
  const innerToken = randomBytes(24).toString('hex');
  const sandbox = await prepared.launcher.start({
    name: 'jupyterlab',
    uid,
    command: [
      PYTHON,
      `${SANDBOX_LAB_DIR}/main.py`,
      '--ServerApp.sock=/run/jupyter.sock',
      '--ServerApp.sock_mode=0600',
      `--ServerApp.base_url=${BASE_URL}`,
      '--ServerApp.root_dir=/workspace',
      '--ServerApp.open_browser=False',
      '--KernelManager.transport=ipc',
      `--LabServerApp.extra_labextensions_path=${SANDBOX_EXTENSIONS_DIR}`,
    ],
    env: {
      JUPYTER_TOKEN: innerToken,
      CODEAGENT_LAB_STATE_DIR: '/workspace/.jupyterlab-state',
      IPYTHONDIR: '/tmp/.ipython',
      JUPYTER_RUNTIME_DIR: '/run',
      JUPYTER_DATA_DIR: '/tmp/.jupyter-data',
      JUPYTER_CONFIG_DIR: '/tmp/.jupyter',
      MPLCONFIGDIR: '/tmp/.mpl',
      PYDEVD_DISABLE_FILE_VALIDATION: '1',
      PYTHONDONTWRITEBYTECODE: '1',
      PYTHONPATH: PY_DIR,
    },
    limits: { memoryBytes: config.sandbox.memoryBytes, pids: config.sandbox.pidsMax, cpus: config.sandbox.cpus },
    workspaceBytes: config.sandbox.diskBytes,
    tmpBytes: config.sandbox.tmpBytes,
    workspaceDir: notebooks,
    readOnly: [
      { source: join(HOST_DIR, 'main.py'), dest: `${SANDBOX_LAB_DIR}/main.py` },
      { source: join(HOST_DIR, 'build'), dest: `${SANDBOX_LAB_DIR}/build` },
      { source: LABEXTENSIONS, dest: SANDBOX_EXTENSIONS_DIR },
      { source: NODELAY_DIR, dest: PY_DIR },
    ],
  });
  const socketPath = sandbox.hostPath('/run/jupyter.sock');
  const proxy = tokenSwappingProxy(socketPath, config.jupyterlab.token, innerToken);

  let stopping = false;
  const stop = async (code: number) => {
    if (stopping) return;
    stopping = true;
    proxy.close();
    await sandbox.stop();
    await prepared.launcher.close();
    process.exit(code);
  };
  process.once('SIGTERM', () => void stop(0));
  process.once('SIGINT', () => void stop(0));
  void sandbox.exited.then(({ code }) => {
    if (!stopping)
      console.error(`codeagent jupyterlab: the sandboxed JupyterLab server exited (${code}): ${sandbox.output().trim().split('\n').slice(-3).join(' | ')}`);
    void stop(code ?? 1);
  });

  await waitReady(sandbox, socketPath, innerToken);
  await new Promise<void>((resolve, reject) => {
    proxy.once('error', reject);
    proxy.listen(config.jupyterlabPort, '127.0.0.1', resolve);
  });
  return `http://127.0.0.1:${config.jupyterlabPort}${BASE_URL}`;
}

async function waitReady(sandbox: Sandbox, socketPath: string, token: string): Promise<void> {
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline && sandbox.running) {
    const ok = await new Promise<boolean>((resolve) => {
      const req = request(
        { createConnection: () => connectInside(socketPath), path: `${BASE_URL}api/status`, headers: { authorization: `token ${token}`, host: 'localhost' } },
        (res) => {
          res.resume();
          resolve(res.statusCode === 200);
        },
      );
      req.on('error', () => resolve(false));
      req.end();
    });
    if (ok) return;
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`JupyterLab did not start in its sandbox within 60 s: ${sandbox.output().trim().split('\n').slice(-5).join(' | ')}`);
}

/**
 * HTTP and websocket proxy from 127.0.0.1:JUPYTERLAB_PORT to the server's Unix socket. Only a
 * request carrying `Authorization: token <outer>` (what the gateway injects) passes, with the
 * header replaced by the inner server's token; anything else gets 403, like Jupyter itself.
 */
function tokenSwappingProxy(socketPath: string, outer: string, inner: string): Server {
  const target = { path: socketPath, token: inner };
  // JupyterLab's pages and files from the installed host, the server's answers confined: what
  // the runtime does for each workspace's lab (decision 0245; the kernels share the server's uid).
  const files = { hostDir: HOST_DIR, extensionsDir: LABEXTENSIONS };
  const settings = settingsCheck(pluginSchemas(files));
  const page = { base: BASE_URL, serverRoot: '/workspace', stateDir: '/workspace/.jupyterlab-state' };
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    if (!carriesToken(req, outer)) {
      res.writeHead(403, { 'content-type': 'application/json' }).end('{"message":"Forbidden"}');
      return;
    }
    const url = req.url ?? '/';
    const rest = url.startsWith(BASE_URL) ? url.slice(BASE_URL.length - 1) : undefined;
    if (rest !== undefined && answerOwnLabPath(req, res, rest, files, page)) return;
    relayRequest(
      req,
      res,
      target,
      () => res.writeHead(502, { 'content-type': 'application/json' }).end('{"message":"the sandboxed JupyterLab server does not answer"}'),
      rest === undefined ? undefined : settings(req.method, rest),
      (headers) => labAnswerHeaders(rest ?? url, headers, BASE_URL),
    );
  });
  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    if (!carriesToken(req, outer)) {
      socket.end('HTTP/1.1 403 Forbidden\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
      return;
    }
    relayUpgrade(req, socket, head, target);
  });
  return server;
}

/** KERNEL_SANDBOX=off (one developer on their own machine): the host as before, unsandboxed, on TCP. */
async function startUnsandboxed(config: Config, notebooks: string): Promise<string> {
  const child = spawn(
    PYTHON,
    [
      join(HOST_DIR, 'main.py'),
      '--ServerApp.ip=127.0.0.1',
      `--ServerApp.port=${config.jupyterlabPort}`,
      '--ServerApp.port_retries=0',
      '--ServerApp.open_browser=False',
      `--ServerApp.base_url=${BASE_URL}`,
      `--ServerApp.root_dir=${notebooks}`,
      `--LabServerApp.extra_labextensions_path=${LABEXTENSIONS}`,
      ...(process.getuid?.() === 0 ? ['--allow-root'] : []),
    ],
    {
      // The token goes through the environment, not the command line (visible in `ps`).
      env: {
        PATH: process.env.PATH ?? '/usr/bin:/bin',
        HOME: process.env.HOME ?? notebooks,
        LANG: 'C.UTF-8',
        JUPYTER_TOKEN: config.jupyterlab.token,
        PYDEVD_DISABLE_FILE_VALIDATION: '1',
        PYTHONDONTWRITEBYTECODE: '1',
        PYTHONPATH: NODELAY_DIR,
        CODEAGENT_LAB_STATE_DIR: join(config.dataDir, 'jupyterlab'),
      },
      stdio: ['ignore', 'inherit', 'inherit'],
    },
  );
  const stop = () => child.kill('SIGTERM');
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
  child.once('exit', (code, signal) => process.exit(code ?? (signal === 'SIGTERM' ? 0 : 1)));

  const url = `http://127.0.0.1:${config.jupyterlabPort}${BASE_URL}`;
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline && child.exitCode === null) {
    try {
      const res = await fetch(`${url}api/status`, { headers: { authorization: `token ${config.jupyterlab.token}` } });
      if (res.ok) return url;
    } catch {
      /* not listening yet */
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`JupyterLab did not answer at ${url} within 60 s`);
}

import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { freePort } from '@codeagent/service-kit';
import { NODELAY_MODULE, nodelayExtension } from './nodelay.js';
import { startTestKernels } from './testing.js';

const PYTHON = '/usr/bin/python3';
const TOKEN = 'nodelay-test-token';
const isRoot = process.getuid?.() === 0;

/** TCP_NODELAY of the server process's socket whose peer is `peerPort` (pidfd_getfd: needs root). */
const READ_NODELAY = String.raw`
import ctypes, os, socket, sys
pid, peer = int(sys.argv[1]), int(sys.argv[2])
inode = None
for name in ("tcp", "tcp6"):
    for line in open(f"/proc/{pid}/net/{name}").read().splitlines()[1:]:
        f = line.split()
        if int(f[2].split(":")[1], 16) == peer and f[3] == "01":
            inode = f[9]
fd = next(int(n) for n in os.listdir(f"/proc/{pid}/fd") if os.readlink(f"/proc/{pid}/fd/{n}") == f"socket:[{inode}]")
got = ctypes.CDLL(None, use_errno=True).syscall(438, os.pidfd_open(pid), fd, 0)
if got < 0:
    raise OSError(ctypes.get_errno(), "pidfd_getfd")
print(socket.socket(fileno=got).getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
`;

/** A Jupyter server on TCP, as a developer would run one (KERNEL_SANDBOX=off, JUPYTER_URL). */
async function tcpServer(withExtension: boolean, dir: string): Promise<{ child: ChildProcess; url: string }> {
  mkdirSync(dir, { recursive: true });
  const port = await freePort();
  const hostDir = fileURLToPath(new URL('../python/', import.meta.url));
  const ext = nodelayExtension(hostDir);
  const child = spawn(
    PYTHON,
    [
      '-m',
      'jupyter_server',
      `--ServerApp.port=${port}`,
      '--ServerApp.ip=127.0.0.1',
      '--ServerApp.port_retries=0',
      '--ServerApp.open_browser=False',
      `--ServerApp.root_dir=${dir}`,
      ...(withExtension ? ext.args : []),
      ...(isRoot ? ['--allow-root'] : []),
    ],
    {
      env: {
        PATH: '/usr/bin:/bin',
        HOME: dir,
        JUPYTER_TOKEN: TOKEN,
        JUPYTER_RUNTIME_DIR: join(dir, 'run'),
        JUPYTER_CONFIG_DIR: join(dir, 'cfg'),
        JUPYTER_DATA_DIR: join(dir, 'data'),
        IPYTHONDIR: join(dir, 'ipy'),
        PYDEVD_DISABLE_FILE_VALIDATION: '1',
        PYTHONDONTWRITEBYTECODE: '1',
        ...(withExtension ? { PYTHONPATH: hostDir } : {}),
      },
      stdio: 'ignore',
    },
  );
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 600; i++) {
    try {
      if ((await fetch(`${url}/api/status?token=${TOKEN}`)).ok) return { child, url };
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  child.kill('SIGKILL');
  throw new Error('the Jupyter server did not start');
}

/** Opens a kernel websocket and reads TCP_NODELAY on the server's end of it. */
async function serverNodelay(server: { child: ChildProcess; url: string }): Promise<number> {
  const kernel = (await (await fetch(`${server.url}/api/kernels?token=${TOKEN}`, { method: 'POST', body: '{}' })).json()) as { id: string };
  const ws = new WebSocket(`${server.url.replace('http', 'ws')}/api/kernels/${kernel.id}/channels?token=${TOKEN}`);
  try {
    await new Promise((resolve, reject) => {
      ws.once('open', resolve);
      ws.once('error', reject);
    });
    // The handler's open() runs right after the handshake; a kernel_info round trip makes sure it has.
    const reply = new Promise((resolve) => ws.on('message', (m) => (m as Buffer).toString().includes('"kernel_info_reply"') && resolve(undefined)));
    ws.send(
      JSON.stringify({
        header: { msg_id: 'k1', msg_type: 'kernel_info_request', session: 's', username: '', date: '', version: '5.3' },
        parent_header: {},
        metadata: {},
        content: {},
        channel: 'shell',
        buffers: [],
      }),
    );
    await reply;
    const localPort = (ws as unknown as { _socket: { localPort: number } })._socket.localPort;
    return Number(
      execFileSync(PYTHON, ['-c', READ_NODELAY, String(server.child.pid), String(localPort)])
        .toString()
        .trim(),
    );
  } finally {
    ws.close();
    await fetch(`${server.url}/api/kernels/${kernel.id}?token=${TOKEN}`, { method: 'DELETE' });
  }
}

describe.skipIf(!isRoot)('TCP no-delay on kernel websockets (the codeagent_nodelay server extension)', () => {
  let dir: string;
  const servers: ChildProcess[] = [];
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'nodelay-test-'));
  });
  afterAll(() => {
    for (const c of servers) c.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });

  it("turns Nagle's algorithm off on the server's end of a kernel websocket, which Debian's jupyter_server leaves on", async () => {
    const plain = await tcpServer(false, join(dir, 'plain'));
    const patched = await tcpServer(true, join(dir, 'patched'));
    servers.push(plain.child, patched.child);
    expect(await serverNodelay(plain)).toBe(0);
    expect(await serverNodelay(patched)).toBe(1);
  }, 120_000);
});

describe('the sandboxed workspace servers get the extension', () => {
  it('is readable (read-only) in the sandbox and finds the kernel websocket handler of this jupyter_server', async () => {
    const k = await startTestKernels();
    try {
      const id = await k.kernels.startKernel('python3', '0a0a0a0a-0000-4000-8000-0000000000aa');
      const out = await k.kernels.execute(
        id,
        `import ${NODELAY_MODULE}, os\nprint(${NODELAY_MODULE}.patched_handlers(), os.access(${NODELAY_MODULE}.__file__, os.W_OK))`,
      );
      expect(out.status).toBe('ok');
      expect(JSON.stringify(out.outputs)).toMatch(/\['(ZMQChannelsHandler|KernelWebsocketHandler)'\] False/);
    } finally {
      await k.stop();
    }
  }, 120_000);
});

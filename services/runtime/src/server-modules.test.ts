import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, readlinkSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { freePort } from '@codeagent/service-kit';
import { NODELAY_MODULE, serverModules } from './server-modules.js';
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
async function tcpServer(withExtension: boolean, dir: string, extra: string[] = []): Promise<{ child: ChildProcess; url: string }> {
  mkdirSync(dir, { recursive: true });
  const port = await freePort();
  const hostDir = fileURLToPath(new URL('../python/', import.meta.url));
  const ext = serverModules(hostDir);
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
      ...(withExtension ? ext.extensionArgs : []),
      ...extra,
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
        ...(withExtension || extra.length > 0 ? { PYTHONPATH: hostDir } : {}),
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

/**
 * Decision 0219: JupyterLab uploads a file over 1 MiB in parts, and Jupyter's own manager closed
 * the file after each; on the workspace mount every close is an upload and a version. The
 * runtime's manager keeps the file open from the first part to the last.
 */
describe('chunked uploads are one write (the codeagent_contents manager)', () => {
  let dir: string;
  let server: { child: ChildProcess; url: string };
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'contents-test-'));
    const { contentsArgs } = serverModules(fileURLToPath(new URL('../python/', import.meta.url)));
    server = await tcpServer(false, join(dir, 'root'), [
      ...contentsArgs,
      '--FileContentsManager.use_atomic_writing=False',
      '--OneWriteFileManager.upload_idle_seconds=1',
      '--OneWriteFileManager.max_open_uploads=2',
    ]);
  }, 60_000);
  afterAll(() => {
    server?.child.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });

  const put = async (path: string, body: object) => {
    const res = await fetch(`${server.url}/api/contents/${path}?token=${TOKEN}`, { method: 'PUT', body: JSON.stringify(body) });
    return { status: res.status, model: (await res.json()) as Record<string, unknown> };
  };
  const part = (path: string, chunk: number, content: string) =>
    put(path, { type: 'file', format: 'base64', chunk, content: Buffer.from(content).toString('base64') });
  /** The files the server process holds open. */
  const held = () =>
    readdirSync(`/proc/${server.child.pid}/fd`).flatMap((fd) => {
      try {
        return [readlinkSync(`/proc/${server.child.pid}/fd/${fd}`)];
      } catch {
        return [];
      }
    });
  const onDisk = (name: string) => join(dir, 'root', name);
  const until = async (done: () => boolean) => {
    for (let i = 0; i < 100 && !done(); i++) await new Promise((r) => setTimeout(r, 100));
    return done();
  };

  it('holds the file open from the first part to the last; the parts before the last are answered as partial', async () => {
    const first = await part('a.bin', 1, 'one-');
    expect(first.status).toBe(201);
    expect(first.model).toMatchObject({ name: 'a.bin', type: 'file', size: 4, codeagent_upload: 'partial' });
    expect(held()).toContain(onDisk('a.bin'));
    expect((await part('a.bin', 2, 'two-')).model).toMatchObject({ size: 8, codeagent_upload: 'partial' });
    expect(held()).toContain(onDisk('a.bin'));
    const last = await part('a.bin', -1, 'three');
    expect(last.status).toBe(200);
    expect(last.model).toMatchObject({ name: 'a.bin', size: 13 });
    expect(last.model).not.toHaveProperty('codeagent_upload');
    expect(held()).not.toContain(onDisk('a.bin'));
    expect(readFileSync(onDisk('a.bin'), 'utf8')).toBe('one-two-three');
  });

  it('closes an upload that gets no part (a closed browser tab), keeping what arrived; a whole save of the file ends its upload', async () => {
    await part('abandoned.bin', 1, 'half');
    expect(held()).toContain(onDisk('abandoned.bin'));
    expect(await until(() => !held().includes(onDisk('abandoned.bin')))).toBe(true);
    expect(readFileSync(onDisk('abandoned.bin'), 'utf8')).toBe('half');

    await part('replaced.txt', 1, 'upload');
    expect((await put('replaced.txt', { type: 'file', format: 'text', content: 'whole' })).status).toBe(200);
    expect(held()).not.toContain(onDisk('replaced.txt'));
    expect(readFileSync(onDisk('replaced.txt'), 'utf8')).toBe('whole');
  }, 30_000);

  it('keeps at most max_open_uploads open: the oldest is closed, and its next part appends, so its file is still whole', async () => {
    await part('x.bin', 1, 'x1-');
    await part('y.bin', 1, 'y1-');
    await part('z.bin', 1, 'z1-');
    const open = held();
    expect([onDisk('x.bin'), onDisk('y.bin'), onDisk('z.bin')].filter((p) => open.includes(p))).toEqual([onDisk('y.bin'), onDisk('z.bin')]);
    for (const name of ['x', 'y', 'z']) await part(`${name}.bin`, -1, `${name}2`);
    for (const name of ['x', 'y', 'z']) expect(readFileSync(onDisk(`${name}.bin`), 'utf8')).toBe(`${name}1-${name}2`);
    expect(held().filter((p) => p.endsWith('.bin'))).toEqual([]);
  });

  it('refuses a name with a bidirectional control character (decision 0224), by save, upload part, new folder and rename; right-to-left names pass', async () => {
    // The characters of validateNewObjectPath (packages/storage/src/paths.ts and its test).
    for (const c of ['\u061c', '\u200e', '\u200f', '\u202a', '\u202b', '\u202c', '\u202d', '\u202e', '\u2066', '\u2067', '\u2068', '\u2069']) {
      const name = encodeURIComponent(`invoice${c}fdp.exe`);
      const code = `U+${c.codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')}`;
      const saved = await put(name, { type: 'file', format: 'text', content: 'MZ' });
      expect([code, saved.status]).toEqual([code, 400]);
      expect(saved.model.message).toContain(`bidirectional control characters (${code})`);
      expect((await part(name, 1, 'MZ')).status).toBe(400);
    }
    expect((await put(encodeURIComponent('folder\u202e'), { type: 'directory' })).status).toBe(400);
    // The invisible characters too (zero-width space, byte-order mark, soft hyphen, Hangul filler).
    for (const c of ['\u200b', '\ufeff', '\u00ad', '\u3164', '\u{e0020}', '\ufff9']) {
      const saved = await put(encodeURIComponent(`report${c}.txt`), { type: 'file', format: 'text', content: 'x' });
      expect(saved.status).toBe(400);
      expect(saved.model.message).toContain('invisible characters');
    }
    expect((await put('plain.txt', { type: 'file', format: 'text', content: 'x' })).status).toBe(201);
    const renamed = await fetch(`${server.url}/api/contents/plain.txt?token=${TOKEN}`, {
      method: 'PATCH',
      body: JSON.stringify({ path: 'txt.\u202eplain' }),
    });
    expect(renamed.status).toBe(400);
    expect(readdirSync(join(dir, 'root')).filter((n) => /[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/.test(n))).toEqual([]);
    expect(readFileSync(onDisk('plain.txt'), 'utf8')).toBe('x');
    expect((await put(encodeURIComponent('تقرير.txt'), { type: 'file', format: 'text', content: 'x' })).status).toBe(201);
  });

  it("refuses a part it cannot place or decode with 400, in Jupyter's error shape", async () => {
    for (const chunk of [0, -2, 1.5]) {
      const got = await put('bad.bin', { type: 'file', format: 'text', chunk, content: 'x' });
      expect(got.status).toBe(400);
      expect(got.model.message).toMatch(/chunk is 1 for the first part/);
    }
    expect((await put('bad.bin', { type: 'file', format: 'hex', chunk: 1, content: 'x' })).status).toBe(400);
    expect((await put('bad.bin', { type: 'notebook', chunk: 1, content: {} })).status).toBe(400);
  });
});

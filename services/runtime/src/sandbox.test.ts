import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KernelAPI } from '@jupyterlab/services';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import pino from 'pino';
import { DEFAULT_TOOLS, UnknownWorkspaceError, commandLine, descendants, memoryUidAllocator, type UidAllocator } from '@codeagent/sandbox';
import type { ErrorBody } from '@codeagent/service-kit';
import { buildRuntimeApp } from './app.js';
import type { Kernels } from './kernels-factory.js';
import type { SandboxedServers } from './servers.js';
import { startTestKernels, type ExecuteAnswer, type ListKernelsAnswer, type RunNotebookAnswer, type StartKernelAnswer } from './testing.js';

const TOKEN = 'runtime-sandbox-test-token';
/** Warnings of the runtime, kept for the tests that expect one. */
const warnings: string[] = [];
const log = pino({ level: 'warn' }, { write: (line: string) => void warnings.push(line) });
const WS_A = '0a0a0a0a-0000-4000-8000-00000000000a';
const WS_B = '0b0b0b0b-0000-4000-8000-00000000000b';
const WS_C = '0d0d0d0d-0000-4000-8000-00000000000d';
const UNKNOWN = '0c0c0c0c-0000-4000-8000-00000000000c';
const isRoot = process.getuid?.() === 0;

/** A uid allocator that knows three workspaces and refuses others, as the database one does. */
function knownWorkspaces(): UidAllocator {
  const inner = memoryUidAllocator(1_900_000_000);
  return {
    uidFor: (ws) => {
      if (![WS_A, WS_B, WS_C].includes(ws)) return Promise.reject(new UnknownWorkspaceError(ws));
      return inner.uidFor(ws);
    },
  };
}

const text = (res: { json(): { outputs: { text?: string; data?: Record<string, string> }[] } }) =>
  res
    .json()
    .outputs.map((o) => o.text ?? o.data?.['text/plain'] ?? '')
    .join('');

describe('sandboxed kernels: one Jupyter server per workspace', () => {
  let k: Kernels;
  let app: FastifyInstance;
  const act = async (body: Record<string, unknown>) =>
    app.inject({ method: 'POST', url: '/api/v1/jupyter', headers: { 'x-internal-service-token': TOKEN }, payload: body });
  const start = async (workspace_id?: string) => {
    const res = await act({ action: 'start_kernel', ...(workspace_id ? { workspace_id } : {}) });
    expect(res.statusCode, res.body).toBe(200);
    return res.json<StartKernelAnswer>().kernel_id;
  };
  const run = (kernel_id: string, code: string, timeout_seconds = 60) => act({ action: 'execute', kernel_id, code, timeout_seconds });

  beforeAll(async () => {
    k = await startTestKernels({ log, uids: knownWorkspaces(), sandbox: { kernelMemoryBytes: 256 * 1024 * 1024, kernelPidsMax: 64, maxServers: 3 } });
    app = await buildRuntimeApp({ kernels: k.kernels, internalServiceToken: TOKEN });
  }, 60_000);
  afterAll(async () => {
    await app.close();
    await k.stop();
  });

  it('runs each workspace in its own sandbox: own uid, own files, kernels listed with their workspace', async () => {
    const a = await start(WS_A);
    const b = await start(WS_B);
    const scratch = await start();
    expect((await run(a, 'open("/workspace/secret-a.txt", "w").write("only for A")\nimport os; print(os.getuid())')).json<ExecuteAnswer>().status).toBe('ok');
    const uidA = Number(text(await run(a, 'import os; print(os.getuid())')));
    const uidB = Number(text(await run(b, 'import os; print(os.getuid())')));
    const uidScratch = Number(text(await run(scratch, 'import os; print(os.getuid())')));
    if (isRoot) {
      expect(new Set([uidA, uidB, uidScratch]).size).toBe(3);
      expect(Math.min(uidA, uidB, uidScratch)).toBeGreaterThanOrEqual(1_900_000_000);
    }
    expect(text(await run(b, 'import os; print(sorted(os.listdir("/workspace")))'))).toBe('[]\n');
    expect(text(await run(scratch, 'import os; print(os.path.exists("/workspace/secret-a.txt"))'))).toBe('False\n');
    expect(text(await run(a, 'print(open("/workspace/secret-a.txt").read())'))).toBe('only for A\n');
    const list = (await act({ action: 'list_kernels' })).json<ListKernelsAnswer>().kernels;
    expect(list).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ kernel_id: a, workspace_id: WS_A }),
        expect.objectContaining({ kernel_id: b, workspace_id: WS_B }),
        expect.objectContaining({ kernel_id: scratch, workspace_id: null }),
      ]),
    );
    for (const id of [a, b, scratch]) expect((await act({ action: 'shutdown', kernel_id: id })).statusCode).toBe(200);
  });

  it('answers 404 for a workspace that does not exist and 400 for one that is not a UUID', async () => {
    const res = await act({ action: 'start_kernel', workspace_id: UNKNOWN });
    expect(res.statusCode).toBe(404);
    expect(res.json()).toMatchObject({ error: 'not_found' });
    expect((await act({ action: 'start_kernel', workspace_id: '../etc' })).statusCode).toBe(400);
  });

  it("never puts the Jupyter token on a command line (it is in the server's environment only)", async () => {
    const kernel = await start(WS_A);
    const ours = descendants(process.pid);
    const tokens = new Set<string>();
    for (const pid of ours) {
      try {
        for (const v of readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0')) if (v.startsWith('JUPYTER_TOKEN=')) tokens.add(v.slice(14));
      } catch {
        // gone
      }
    }
    expect(tokens.size).toBeGreaterThan(0);
    const lines = ours.map((pid) => commandLine(pid)?.join(' ') ?? '');
    for (const token of tokens) expect(lines.filter((l) => l.includes(token))).toEqual([]);
    expect(lines.filter((l) => /ServerApp\.token|--token/.test(l))).toEqual([]);
    await act({ action: 'shutdown', kernel_id: kernel });
  });

  it.runIf(isRoot)(
    'ends a memory hog with a clear error: only its kernel dies, it is restarted, the server stays',
    async () => {
      const hog = await start(WS_A);
      const neighbour = await start(WS_A);
      await run(neighbour, 'keep = 41');
      const res = await run(hog, 'x = bytearray(1024 * 1024 * 1024)\nprint("survived")');
      expect(res.statusCode).toBe(200);
      expect(res.json()).toMatchObject({ status: 'error', kernel_died: true });
      const err = res.json<ExecuteAnswer>().outputs.find((o) => o.output_type === 'error');
      expect(err).toMatchObject({ ename: 'DeadKernelError' });
      expect(err?.evalue).toMatch(/ran out of memory.*KERNEL_MEMORY_MB/);
      expect(text(res)).not.toContain('survived');
      // the neighbour kept its state; the hog's kernel was restarted and works again
      expect(text(await run(neighbour, 'print(keep + 1)'))).toBe('42\n');
      expect(text(await run(hog, 'print("back")'))).toBe('back\n');
      await act({ action: 'shutdown', kernel_id: hog });
      await act({ action: 'shutdown', kernel_id: neighbour });
    },
    90_000,
  );

  it.runIf(isRoot)(
    'contains a fork bomb in its kernel: the execution ends, shutdown leaves no process, the workspace goes on',
    async () => {
      const bomb = await start(WS_B);
      const code = [
        'import os, time',
        'n = 0',
        'for _ in range(100000):',
        '    try:',
        '        if os.fork() == 0:',
        '            os.setsid()',
        '            time.sleep(300)',
        '            os._exit(0)',
        '        n += 1',
        '    except OSError as e:',
        '        print("fork refused after", n, e.strerror)',
        '        break',
      ].join('\n');
      const res = await run(bomb, code, 30);
      expect(res.statusCode).toBe(200);
      expect(text(res)).toMatch(/fork refused after \d+ Resource temporarily unavailable/);
      const refusedAfter = Number(/after (\d+)/.exec(text(res))![1]);
      expect(refusedAfter).toBeLessThan(64);
      expect((await act({ action: 'shutdown', kernel_id: bomb })).statusCode).toBe(200);
      // the children (in their own sessions) died with the kernel's cgroup: a new kernel can fork freely
      const next = await start(WS_B);
      expect(text(await run(next, 'import subprocess\nprint(subprocess.run(["true"]).returncode)'))).toBe('0\n');
      await act({ action: 'shutdown', kernel_id: next });
    },
    90_000,
  );

  it('survives user code killing every process it can see: the request fails clearly and the next one restarts the server', async () => {
    const victim = await start(WS_A);
    // kill(-1) spares the caller: the kernel lives on until its sandbox goes with the server.
    const res = await run(victim, 'import os, signal, time\nos.kill(-1, signal.SIGKILL)\ntime.sleep(20)', 30);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({ status: 'error', kernel_died: true });
    expect(res.json<ExecuteAnswer>().outputs.at(-1)).toMatchObject({ ename: 'DeadKernelError' });
    // the kernel is gone with its server; the workspace gets a new server on the next start
    expect([404, 200]).toContain((await run(victim, '1')).statusCode);
    const again = await start(WS_A);
    expect(text(await run(again, 'print(6 * 7)'))).toBe('42\n');
    await act({ action: 'shutdown', kernel_id: again });
  }, 90_000);

  it('executes over ZeroMQ, and never over sockets that the workspace named in a connection file', async () => {
    const first = await start(WS_B);
    expect(text(await run(first, 'print(1 + 1)'))).toBe('2\n');
    expect(warnings.filter((w) => w.includes(first))).toEqual([]);
    // The workspace's code rewrites the connection file of its other kernel (the file is the
    // workspace's own) before the runtime first talks to that kernel. The runtime refuses the
    // sockets it names; the Jupyter server, which reads the file too, cannot reach the kernel
    // either, so the workspace has only broken its own kernel: the execute ends at its timeout.
    const second = await start(WS_B);
    const tamper = [
      'import json',
      `p = "/run/kernel-${second}.json"`,
      'c = json.load(open(p))',
      'c["ip"] = "/tmp/elsewhere"',
      'open(p, "w").write(json.dumps(c))',
      'print("rewritten")',
    ].join('\n');
    expect(text(await run(first, tamper))).toBe('rewritten\n');
    const broken = await run(second, 'print(6 * 7)', 5);
    expect(broken.json()).toMatchObject({ status: 'error', timed_out: true });
    expect(warnings.filter((w) => w.includes(second)).join('')).toMatch(/other sockets/);
    // The other kernel is untouched.
    expect(text(await run(first, 'print(6 * 7)'))).toBe('42\n');
    await act({ action: 'shutdown', kernel_id: first });
    await act({ action: 'shutdown', kernel_id: second });
  }, 90_000);

  it('executes over ZeroMQ again after the kernel was restarted from JupyterLab (through its server, not the runtime)', async () => {
    const kid = await start(WS_B);
    expect(text(await run(kid, 'x = 20\nprint(x + 1)'))).toBe('21\n');
    const server = await k.pool.server(WS_B);
    await KernelAPI.restartKernel(kid, server.settings);
    // A new process: the old state is gone, and its output still comes back.
    const after = await run(kid, 'print("x" in globals(), 6 * 7)');
    expect(text(after)).toBe('False 42\n');
    expect(warnings.filter((w) => w.includes(kid))).toEqual([]);
    await act({ action: 'shutdown', kernel_id: kid });
  }, 90_000);

  it('runs a notebook in a fresh copy of the workspace files and returns only what it created or changed', async () => {
    const b64 = (s: string) => Buffer.from(s).toString('base64');
    const notebook = {
      nbformat: 4,
      nbformat_minor: 5,
      metadata: {},
      cells: [
        {
          cell_type: 'code',
          source: 'import os\nprint(os.getcwd().split("/")[-1])\nrows = open("../data/in.csv").read().split()\nprint(len(rows))',
          metadata: {},
          outputs: [],
        },
        {
          cell_type: 'code',
          source:
            'open("result.txt", "w").write(str(sum(int(r) for r in rows)))\nos.makedirs("out/deep", exist_ok=True)\nopen("out/deep/x.bin", "wb").write(bytes(range(256)))\nopen("../data/in.csv", "a").write("4\\n")\nopen(".hidden", "w").write("not collected")',
          metadata: {},
          outputs: [],
        },
      ],
    };
    const files = [
      { path: 'jobs/sum.ipynb', content_base64: b64(JSON.stringify(notebook)) },
      { path: 'data/in.csv', content_base64: b64('1\n2\n3\n') },
      { path: 'data/untouched.txt', content_base64: b64('same') },
    ];
    const res = await act({ action: 'run_notebook', notebook, workspace_id: WS_B, notebook_path: 'jobs/sum.ipynb', files });
    expect(res.statusCode, res.body).toBe(200);
    const body = res.json<RunNotebookAnswer>();
    expect(body.status).toBe('ok');
    expect(body.notebook.cells[0]?.outputs[0]?.text).toBe('jobs\n3\n');
    const got = Object.fromEntries((body.files ?? []).map((f) => [f.path, Buffer.from(f.content_base64, 'base64')]));
    expect(Object.keys(got).sort()).toEqual(['data/in.csv', 'jobs/out/deep/x.bin', 'jobs/result.txt']);
    expect(got['jobs/result.txt']!.toString()).toBe('6');
    expect(got['data/in.csv']!.toString()).toBe('1\n2\n3\n4\n');
    expect([...got['jobs/out/deep/x.bin']!]).toEqual([...Array(256).keys()]);
    // the run's directory is gone afterwards: runs never see each other's copies
    const probe = await start(WS_B);
    expect(text(await run(probe, 'import os\nprint([n for n in os.listdir("/workspace/.codeagent-runs") if not n.startswith(".")])'))).toBe('[]\n');
    await act({ action: 'shutdown', kernel_id: probe });
  }, 90_000);

  it("stops a run's kernel when the caller hangs up (the worker cancelled the run)", async () => {
    const url = await app.listen({ host: '127.0.0.1', port: 0 });
    const notebook = {
      nbformat: 4,
      nbformat_minor: 5,
      metadata: {},
      cells: [{ cell_type: 'code', source: 'import time\ntime.sleep(120)', metadata: {}, outputs: [] }],
    };
    const caller = new AbortController();
    const pending = fetch(`${url}/api/v1/jupyter`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-internal-service-token': TOKEN },
      body: JSON.stringify({ action: 'run_notebook', notebook, workspace_id: WS_C }),
      signal: caller.signal,
    }).catch((err: Error) => err);
    const kernelsOfC = async () => (await act({ action: 'list_kernels' })).json<ListKernelsAnswer>().kernels.filter((k) => k.workspace_id === WS_C);
    for (let i = 0; i < 200 && (await kernelsOfC()).length === 0; i++) await new Promise((r) => setTimeout(r, 100));
    expect(await kernelsOfC()).toHaveLength(1);
    caller.abort();
    expect(await pending).toBeInstanceOf(Error);
    for (let i = 0; i < 200 && (await kernelsOfC()).length > 0; i++) await new Promise((r) => setTimeout(r, 100));
    expect(await kernelsOfC()).toEqual([]);
  }, 90_000);

  it('refuses files beyond SANDBOX_FILES_MAX_BYTES with 413, and a run that writes too much keeps none of it', async () => {
    const big = Buffer.alloc(17 * 1024 * 1024).toString('base64');
    const notebook = {
      nbformat: 4,
      nbformat_minor: 5,
      metadata: {},
      cells: [{ cell_type: 'code', source: 'open("huge.bin", "wb").write(b"x" * (20 * 1024 * 1024))', metadata: {}, outputs: [] }],
    };
    const tooMuch = await act({ action: 'run_notebook', notebook, workspace_id: WS_B, files: [{ path: 'big.bin', content_base64: big }] });
    expect(tooMuch.statusCode).toBe(413);
    const writes = await act({ action: 'run_notebook', notebook, workspace_id: WS_B, files: [] });
    expect(writes.statusCode).toBe(200);
    expect(writes.json<RunNotebookAnswer>().files).toEqual([]);
    expect(writes.json<RunNotebookAnswer>().files_error).toMatch(/more than 16 MiB .*SANDBOX_FILES_MAX_BYTES/);
  }, 60_000);

  it("follows no symlink and opens no FIFO the workspace's code puts in place of its sockets and connection files (decision 0253)", async () => {
    // Outside every sandbox: a file and a socket only the host sees.
    const hostDir = mkdtempSync(join(tmpdir(), 'runtime-host-only-'));
    chmodSync(hostDir, 0o755);
    const secret = join(hostDir, 'secret.json');
    writeFileSync(
      secret,
      JSON.stringify({ transport: 'ipc', ip: 'HOST-ONLY-SECRET', signature_scheme: 'hmac-sha256', key: 'k', shell_port: 1, iopub_port: 2 }),
    );
    chmodSync(secret, 0o644);
    const hostSocket = join(hostDir, 'host.sock');
    let reached = 0;
    const listener = createServer((s) => {
      reached++;
      s.end('HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}');
    });
    await new Promise<void>((r) => listener.listen(hostSocket, r));
    try {
      const swap = (kid: string, replace: string) =>
        ['import os', `f = "/run/kernel-${kid}.json"`, 'os.rename(f, f + ".orig")', replace, 'print("swapped")'].join('\n');
      const cases: Array<[string, string]> = [
        ['a symlink to a host file', `os.symlink(${JSON.stringify(secret)}, f)`],
        ['a FIFO (its opening would block a thread of the runtime for good)', 'os.mkfifo(f)'],
        ['a symlink to a device', 'os.symlink("../dev/zero", f)'],
      ];
      for (const [what, replace] of cases) {
        const kid = await start(WS_C);
        expect(text(await run(kid, 'print(1)')), what).toBe('1\n');
        expect(text(await run(kid, swap(kid, replace))), what).toBe('swapped\n');
        // The next execute sees a new connection file: it is refused, and the kernel executes
        // through its Jupyter server instead, at once.
        expect(text(await run(kid, 'print(6 * 7)', 20)), what).toBe('42\n');
        await act({ action: 'shutdown', kernel_id: kid });
      }
      const said = warnings.join('\n');
      expect(said).toMatch(/symlink/);
      expect(said).toMatch(/not a regular file/);
      expect(said).not.toContain('HOST-ONLY-SECRET');
      // The server's socket replaced by a symlink to the host's socket: the runtime connects to neither.
      const kid = await start(WS_C);
      const replaced = [
        'import os',
        'os.rename("/run/jupyter.sock", "/run/real.sock")',
        `os.symlink(${JSON.stringify(hostSocket)}, "/run/jupyter.sock")`,
        'print("swapped")',
      ];
      expect(text(await run(kid, replaced.join('\n')))).toBe('swapped\n');
      // New connections to the server (a kernel start opens a websocket; its REST calls may still
      // reuse a kept connection) reach nothing on the host.
      await act({ action: 'start_kernel', workspace_id: WS_C });
      await act({ action: 'list_kernels' });
      expect(reached).toBe(0);
      // Another workspace is untouched.
      const other = await start(WS_A);
      expect(text(await run(other, 'print(2 + 3)'))).toBe('5\n');
      await act({ action: 'shutdown', kernel_id: other });
    } finally {
      await ((await k.pool.server(WS_C)) as unknown as { stop(): Promise<void> }).stop().catch(() => undefined);
      listener.close();
      rmSync(hostDir, { recursive: true, force: true });
    }
  }, 180_000);

  it('stops idle servers, and makes room under SANDBOX_MAX_SERVERS by stopping an idle one', async () => {
    const pool = k.pool as SandboxedServers;
    // The earlier runs' kernels are dead; Jupyter may still be forgetting them (decision 0125).
    await k.kernels.kernelsEnded();
    await pool.cullIdle(Date.now() + 3600_000);
    expect(pool.running()).toHaveLength(0);
    const a = await start(WS_A);
    const b = await start(WS_B);
    const s = await start();
    expect(pool.running()).toHaveLength(3);
    // all three hold a kernel: a fourth server cannot start
    const more = await act({ action: 'start_kernel', workspace_id: WS_C });
    expect(more.statusCode).toBe(503);
    expect(more.json()).toMatchObject({ error: 'kernel_unavailable' });
    expect(more.json<ErrorBody>().message).toMatch(/SANDBOX_MAX_SERVERS=3/);
    // once the scratch server has no kernel, it is stopped to make room for C
    await act({ action: 'shutdown', kernel_id: s });
    const c = await start(WS_C);
    expect(
      pool
        .running()
        .map((r) => r.workspaceId)
        .sort(),
    ).toEqual([WS_A, WS_B, WS_C].sort());
    for (const id of [a, b, c]) await act({ action: 'shutdown', kernel_id: id });
  }, 90_000);
});

describe('a machine where the sandbox cannot work', () => {
  it('refuses kernels with 503 naming the fix; it never runs them unsandboxed', async () => {
    const k = await startTestKernels({ log, tools: { ...DEFAULT_TOOLS, bwrap: '/nonexistent/bwrap' } });
    const app = await buildRuntimeApp({ kernels: k.kernels, internalServiceToken: TOKEN });
    for (const payload of [{ action: 'start_kernel' }, { action: 'run_notebook', notebook: { nbformat: 4, nbformat_minor: 5, metadata: {}, cells: [] } }]) {
      const res = await app.inject({ method: 'POST', url: '/api/v1/jupyter', headers: { 'x-internal-service-token': TOKEN }, payload });
      expect(res.statusCode).toBe(503);
      expect(res.json<ErrorBody>().error).toBe('kernel_unavailable');
      expect(res.json<ErrorBody>().message).toMatch(/apt-get install -y bubblewrap.*KERNEL_SANDBOX=off/);
    }
    await app.close();
    await k.stop();
  });
});

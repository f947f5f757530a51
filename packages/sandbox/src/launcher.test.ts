import { createServer, type Server } from 'node:net';
import { mkdtempSync, writeFileSync, existsSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { prepareSandbox, type PreparedSandbox } from './detect.js';
import { buildChain, DEFAULT_TOOLS, type SandboxSpec } from './launcher.js';
import { Cgroup } from './cgroups.js';
import { snapshot, stillRunning } from './proc.js';

const UID_BASE = 1_900_000_000;
const MiB = 1024 * 1024;

const spec = (over: Partial<SandboxSpec> = {}): SandboxSpec => ({
  name: 'probe',
  uid: UID_BASE + 77,
  command: ['/usr/bin/python3', '-c', 'print(1)'],
  workspaceBytes: 8 * MiB,
  tmpBytes: 8 * MiB,
  ...over,
});

describe('buildChain (the command line, without running it)', () => {
  const cgroup = new Cgroup(
    new Map([
      ['memory', { version: 1 as const, dir: '/sys/fs/cgroup/memory/x/probe/main' }],
      ['pids', { version: 1 as const, dir: '/sys/fs/cgroup/pids/x/probe/main' }],
    ]),
  );

  it('drops to the sandbox uid before bwrap and unshares every namespace, with no network', () => {
    const chain = buildChain(spec({ env: { JUPYTER_TOKEN: 'per-sandbox-token' } }), { mode: 'root', tools: DEFAULT_TOOLS, cgroup, offDir: undefined });
    expect(chain.file).toBe('/bin/sh');
    const setpriv = chain.args.indexOf('/usr/bin/setpriv');
    const bwrap = chain.args.indexOf('/usr/bin/bwrap');
    expect(setpriv).toBeGreaterThan(0);
    expect(bwrap).toBeGreaterThan(setpriv);
    expect(chain.args.slice(setpriv, bwrap)).toEqual(
      expect.arrayContaining([`--reuid=${UID_BASE + 77}`, `--regid=${UID_BASE + 77}`, '--clear-groups', '--no-new-privs']),
    );
    for (const flag of ['--unshare-user', '--unshare-pid', '--unshare-net', '--unshare-ipc', '--disable-userns', '--die-with-parent', '--new-session']) {
      expect(chain.args).toContain(flag);
    }
    // the cgroup is joined first, by the shell, before prlimit/setpriv/bwrap run
    expect(chain.args.slice(0, 6)).toEqual(
      expect.arrayContaining(['/sys/fs/cgroup/memory/x/probe/main/cgroup.procs', '/sys/fs/cgroup/pids/x/probe/main/cgroup.procs']),
    );
    // root and /dev end read-only; nothing of the host is bound writable
    expect(chain.args.join(' ')).toContain('--remount-ro /dev --remount-ro /');
    expect(chain.args).not.toContain('--bind');
    expect(chain.args).not.toContain('--bind-fd');
  });

  it('keeps secrets off the command line and replaces the environment entirely', () => {
    const chain = buildChain(spec({ env: { JUPYTER_TOKEN: 'per-sandbox-token' } }), {
      mode: 'root',
      tools: DEFAULT_TOOLS,
      cgroup: undefined,
      offDir: undefined,
    });
    expect(chain.args.join(' ')).not.toContain('per-sandbox-token');
    expect(chain.args).not.toContain('--setenv');
    expect(Object.keys(chain.env).sort()).toEqual(['HOME', 'JUPYTER_TOKEN', 'LANG', 'PATH', 'TMPDIR']);
  });

  it('falls back to rlimits for memory and processes without cgroups', () => {
    const chain = buildChain(spec({ limits: { memoryBytes: 512 * MiB, pids: 64 } }), {
      mode: 'root',
      tools: DEFAULT_TOOLS,
      cgroup: undefined,
      offDir: undefined,
    });
    expect(chain.file).toBe('/usr/bin/prlimit');
    expect(chain.args).toEqual(expect.arrayContaining(['--core=0', '--nproc=64', `--as=${512 * MiB}`]));
    const withCgroup = buildChain(spec({ limits: { memoryBytes: 512 * MiB, pids: 64 } }), { mode: 'root', tools: DEFAULT_TOOLS, cgroup, offDir: undefined });
    expect(withCgroup.args.some((a) => a.startsWith('--nproc'))).toBe(false);
  });

  it('does not drop privileges it does not have (rootless) and runs no bwrap when off', () => {
    const rootless = buildChain(spec(), { mode: 'rootless', tools: DEFAULT_TOOLS, cgroup: undefined, offDir: undefined });
    expect(rootless.args.some((a) => a.startsWith('--reuid'))).toBe(false);
    expect(rootless.args).toContain('/usr/bin/bwrap');
    const off = buildChain(spec(), { mode: 'off', tools: DEFAULT_TOOLS, cgroup: undefined, offDir: '/tmp/x/probe' });
    expect(off.args).not.toContain('/usr/bin/bwrap');
    expect(off.env.HOME).toBe('/tmp/x/probe/w');
  });

  it('rejects a sandbox name that could leave its cgroup directory', () => {
    expect(() => buildChain(spec({ name: '../escape' }), { mode: 'root', tools: DEFAULT_TOOLS, cgroup: undefined, offDir: undefined })).toThrow(
      /invalid sandbox name/,
    );
  });
});

/**
 * Real sandboxes on this machine (bubblewrap installed by scripts/system-deps.sh kernels). These
 * fail, never skip, when the sandbox cannot be set up: the platform would refuse kernels too.
 */
describe('a real sandbox', () => {
  let prepared: PreparedSandbox;
  let listener: Server;
  let port = 0;
  let secretDir: string;
  const PROBE = String.raw`
import json, os, socket, sys
out = {}
out["ids"] = [os.getuid(), os.geteuid(), os.getgid(), os.getgroups()]
out["root"] = sorted(os.listdir("/"))
out["env"] = dict(os.environ)
out["pids"] = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
out["pid1_environ"] = open("/proc/1/environ").read().split("\0")
def can_write(p):
    try:
        with open(p, "w") as f: f.write("x")
        return True
    except OSError as e:
        return e.strerror
out["write"] = {p: can_write(p) for p in ["/usr/x", "/x", "/etc/x", "/dev/x", "/workspace/x", "/tmp/x", "/dev/shm/x"]}
def connect(family, addr):
    s = socket.socket(family)
    s.settimeout(2)
    try:
        s.connect(addr); return "connected"
    except OSError as e:
        return e.strerror
    finally:
        s.close()
port = int(sys.argv[1])
out["net"] = {"v4": connect(socket.AF_INET, ("127.0.0.1", port)), "v6": connect(socket.AF_INET6, ("::1", port)), "pg": connect(socket.AF_INET, ("127.0.0.1", 5432)), "out": connect(socket.AF_INET, ("1.1.1.1", 53))}
out["ifaces"] = sorted(n for _, n in socket.if_nameindex())
out["visible"] = {p: os.path.exists(p) for p in sys.argv[2:]}
import pwd
out["user"] = pwd.getpwuid(os.getuid()).pw_name
out["hostname"] = socket.gethostname()
print(json.dumps(out))
`;
  /** What PROBE prints. */
  interface ProbeOut {
    ids: [number, number, number, number[]];
    root: string[];
    env: Record<string, string>;
    pids: number[];
    pid1_environ: string[];
    write: Record<string, true | string>;
    net: { v4: string; v6: string; pg: string; out: string };
    ifaces: string[];
    visible: Record<string, boolean>;
    user: string;
    hostname: string;
  }

  beforeAll(async () => {
    prepared = await prepareSandbox({ enabled: true, uidBase: UID_BASE });
    listener = createServer((s) => s.end('platform\n'));
    await new Promise<void>((r) => listener.listen(0, '::', r));
    port = (listener.address() as { port: number }).port;
    secretDir = mkdtempSync(join(tmpdir(), 'codeagent-sandbox-secret-'));
    writeFileSync(join(secretDir, 'secrets.json'), '{"JWT_SECRET":"x"}', { mode: 0o600 });
  });
  afterAll(async () => {
    listener.close();
    await prepared?.launcher.close();
  });

  async function run(s: SandboxSpec): Promise<{ code: number | null; signal: string | null; output: string }> {
    const sandbox = await prepared.launcher.start(s);
    const end = await sandbox.exited;
    const output = sandbox.output();
    await sandbox.stop();
    return { ...end, output };
  }

  it('is available here as root with cgroups', () => {
    expect(prepared.mode).toBe(process.getuid?.() === 0 ? 'root' : 'rootless');
    expect(prepared.launcher.hasCgroups).toBe(process.getuid?.() === 0);
  });

  it('shows only what was bound, as an unprivileged uid, with a cleared environment and no network', async () => {
    const { code, output } = await run(
      spec({
        command: [
          '/usr/bin/python3',
          '-c',
          PROBE,
          String(port),
          secretDir,
          join(secretDir, 'secrets.json'),
          process.cwd(),
          '/root',
          '/work',
          '/home',
          '/sys',
          '/var',
        ],
        env: { SANDBOX_TOKEN: 'own-token' },
      }),
    );
    expect(code, output).toBe(0);
    const o = JSON.parse(output.trim().split('\n').at(-1)!) as ProbeOut;
    expect(o.ids).toEqual([UID_BASE + 77, UID_BASE + 77, UID_BASE + 77, []]);
    expect(o.user).toBe('user');
    expect(o.hostname).toBe('sandbox');
    expect(o.root).toEqual(['bin', 'dev', 'etc', 'lib', 'lib64', 'proc', 'run', 'sbin', 'tmp', 'usr', 'workspace']);
    expect(Object.values(o.visible)).toEqual(Object.values(o.visible).map(() => false));
    expect(Object.keys(o.env).sort()).toEqual(['HOME', 'LANG', 'PATH', 'PWD', 'SANDBOX_TOKEN', 'TMPDIR']);
    expect(JSON.stringify(o.env)).not.toMatch(/INTERNAL_SERVICE_TOKEN|JWT_SECRET|DATABASE_URL|DATA_DIR/);
    expect(o.pid1_environ.join(' ')).not.toMatch(/INTERNAL_SERVICE_TOKEN|JWT_SECRET|DATABASE_URL|DATA_DIR/);
    // its own PID namespace: bwrap's init and the probe
    expect(o.pids.length).toBeLessThanOrEqual(3);
    expect(o.write['/workspace/x']).toBe(true);
    expect(o.write['/tmp/x']).toBe(true);
    expect(o.write['/dev/shm/x']).toBe(true);
    for (const p of ['/usr/x', '/x', '/etc/x', '/dev/x']) expect(o.write[p], p).toBe('Read-only file system');
    expect(o.ifaces).toEqual(['lo']);
    expect(o.net.v4).toBe('Connection refused');
    expect(o.net.v6).toBe('Connection refused');
    expect(o.net.pg).toBe('Connection refused');
    expect(o.net.out).toBe('Network is unreachable');
  });

  it('cannot grow /workspace or /tmp beyond their size', async () => {
    const fill = 'import sys\ntry:\n  open(sys.argv[1], "wb").write(b"x" * 64 * 1024 * 1024)\n  print("wrote")\nexcept OSError as e:\n  print(e.strerror)';
    for (const target of ['/workspace/big', '/tmp/big']) {
      const { output } = await run(spec({ command: ['/usr/bin/python3', '-c', fill, target] }));
      expect(output.trim(), target).toBe('No space left on device');
    }
  });

  it('refuses new user namespaces, setuid gains and unknown users inside', async () => {
    const code = String.raw`
import subprocess
for cmd in (["/usr/bin/unshare", "-U", "true"], ["/usr/bin/unshare", "-r", "id"], ["/usr/bin/su", "-c", "id"], ["/usr/bin/sudo", "id"]):
    try:
        r = subprocess.run(cmd, capture_output=True, timeout=5)
        print(cmd[0], r.returncode)
    except FileNotFoundError:
        print(cmd[0], "missing")
`;
    const { output } = await run(spec({ command: ['/usr/bin/python3', '-c', code] }));
    for (const line of output.trim().split('\n')) expect(line, output).not.toMatch(/ 0$/);
  });

  it.runIf(process.getuid?.() === 0)('ends a memory hog at its cgroup limit with an OOM kill, and counts it', async () => {
    const sandbox = await prepared.launcher.start(
      spec({
        name: 'hog',
        limits: { memoryBytes: 64 * MiB, pids: 64 },
        command: ['/usr/bin/python3', '-c', 'x = bytearray(256 * 1024 * 1024)\nprint("survived")'],
      }),
    );
    const end = await sandbox.exited;
    expect(sandbox.output()).not.toContain('survived');
    expect(end.signal ?? end.code).not.toBe(0);
    expect(sandbox.cgroup!.events().oomKills).toBeGreaterThan(0);
    await sandbox.stop();
  });

  it.runIf(process.getuid?.() === 0)('contains a fork bomb at its pids limit, and stop() leaves no process behind', async () => {
    const bomb =
      'import os, time\nn = 0\nwhile True:\n  try:\n    if os.fork() == 0:\n      time.sleep(60)\n      os._exit(0)\n    n += 1\n  except OSError:\n    print("refused after", n, flush=True)\n    time.sleep(60)';
    const sandbox = await prepared.launcher.start(spec({ name: 'bomb', limits: { pids: 32 }, command: ['/usr/bin/python3', '-c', bomb] }));
    for (let i = 0; i < 100 && !sandbox.output().includes('refused'); i++) await new Promise((r) => setTimeout(r, 100));
    expect(sandbox.output()).toMatch(/refused after \d+/);
    const refusedAfter = Number(/refused after (\d+)/.exec(sandbox.output())![1]);
    expect(refusedAfter).toBeLessThan(32);
    expect(sandbox.cgroup!.events().pidsLimitHits, JSON.stringify(sandbox.cgroup!.events())).toBeGreaterThan(0);
    const procs = snapshot(sandbox.cgroup!.processes());
    expect(procs.length, `refused after ${refusedAfter}`).toBeGreaterThan(refusedAfter);
    const dirs = [...sandbox.cgroup!.dirs.values()].map((d) => d.dir);
    await sandbox.stop(100);
    // gone, or a zombie that only waits for its reaper (or its pid already another process's)
    expect(procs.filter(stillRunning).map(({ pid }) => `${pid}: ${readFileSync(`/proc/${pid}/status`, 'utf8').split('\n').slice(0, 3).join(' ')}`)).toEqual([]);
    for (const d of dirs) expect(existsSync(d)).toBe(false);
  });

  it('serves a Unix socket inside that the host reaches through /proc/<pid>/root, with no shared host directory', async () => {
    const server =
      'import socket\ns = socket.socket(socket.AF_UNIX)\ns.bind("/run/probe.sock")\ns.listen(1)\nprint("ready", flush=True)\nc, _ = s.accept()\nc.sendall(b"inside\\n")\nc.close()';
    const sandbox = await prepared.launcher.start(spec({ name: 'sock', command: ['/usr/bin/python3', '-c', server] }));
    for (let i = 0; i < 100 && !sandbox.output().includes('ready'); i++) await new Promise((r) => setTimeout(r, 50));
    const { connect } = await import('node:net');
    const got = await new Promise<string>((resolve, reject) => {
      const c = connect(sandbox.hostPath('/run/probe.sock'));
      let data = '';
      c.on('data', (d) => (data += d.toString()));
      c.on('end', () => resolve(data));
      c.on('error', reject);
    });
    expect(got).toBe('inside\n');
    await sandbox.stop();
  });

  it('shows SandboxSpec.files read-only under /run, by content (no host path shared)', async () => {
    const probe =
      'import os\nprint(open("/run/lib/hello.py").read())\ntry:\n  open("/run/lib/hello.py", "w")\nexcept OSError as e:\n  print("write refused:", e.strerror)';
    const { output } = await run(spec({ name: 'files', command: ['/usr/bin/python3', '-c', probe], files: { 'lib/hello.py': 'GREETING = "hi"' } }));
    expect(output).toContain('GREETING = "hi"');
    expect(output).toMatch(/write refused: (Read-only file system|Permission denied)/);
  });
});

describe('without bubblewrap', () => {
  it('refuses with an error that names the fix, instead of running unsandboxed', async () => {
    await expect(prepareSandbox({ enabled: true, uidBase: UID_BASE, tools: { ...DEFAULT_TOOLS, bwrap: '/nonexistent/bwrap' } })).rejects.toThrow(
      /bwrap is missing; install bubblewrap \(`apt-get install -y bubblewrap`.*KERNEL_SANDBOX=off/,
    );
  });

  it('KERNEL_SANDBOX=off warns loudly and still runs (one developer only)', async () => {
    const off = await prepareSandbox({ enabled: false, uidBase: UID_BASE, isRoot: false });
    expect(off.mode).toBe('off');
    expect(off.warnings.join(' ')).toMatch(/UNSANDBOXED/);
    const sandbox = await off.launcher.start(spec({ command: ['/usr/bin/python3', '-c', 'import os; print(os.getcwd())'] }));
    await sandbox.exited;
    expect(sandbox.output().trim()).toBe(sandbox.layout.home);
    await sandbox.stop();
    await off.launcher.close();
  });

  it("KERNEL_SANDBOX=off writes SandboxSpec.files into the sandbox's own run directory, and refuses paths that leave it", async () => {
    const off = await prepareSandbox({ enabled: false, uidBase: UID_BASE, isRoot: false });
    const sandbox = await off.launcher.start(
      spec({
        command: ['/usr/bin/python3', '-c', 'import sys; print(open(sys.argv[1]).read())', `${off.launcher.layout('probe').run}/lib/hello.py`],
        files: { 'lib/hello.py': 'hello' },
      }),
    );
    await sandbox.exited;
    expect(sandbox.output().trim()).toBe('hello');
    await sandbox.stop();
    for (const bad of ['../escape.py', '/etc/passwd', 'lib/../../x', '']) {
      await expect(off.launcher.start(spec({ command: ['/bin/true'], files: { [bad]: 'x' } }))).rejects.toThrow(/invalid sandbox file path/);
    }
    await off.launcher.close();
  });
});

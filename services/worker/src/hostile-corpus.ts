/**
 * The hostile-notebook corpus (issue 13): one-cell probes that try to get out of the kernel
 * sandbox. Each prints `BLOCKED …` for every attempt that failed and `LEAK …` for any that
 * worked; the tests run every probe both through the runtime's `execute` action and as a
 * notebook run (runs API → worker → runtime). Probes never print a value they find, only
 * that they found it, so a leak is reported without spreading the secret further.
 */

/** What a probe learns from the test: where the platform's things are on the host. */
export interface ProbeParams {
  data_dir: string;
  checkout: string;
  /** Host path of another workspace's stored file (local storage). */
  other_blob: string;
  /** Host path of another workspace's Jupyter socket, and the id of a kernel running there. */
  other_jupyter_socket: string;
  other_kernel: string;
  /** The base paths the workspaces' Jupyter servers serve under (`/jupyter/<workspace id>/`). */
  jupyter_base_paths: string[];
  /** TCP ports of the platform's components and sentinels (IPv4 and IPv6 loopback). */
  ports: number[];
  /** Host pids of platform processes. */
  platform_pids: number[];
  /** A unique name: a file the probe writes into its private /tmp must not appear on the host. */
  nonce: string;
  /**
   * Mounted servers (decision 0141): the size in MiB of what each filled directory may take. A
   * fill there may then also end in EDQUOT or EIO (rclone reports its full cache as EIO), but
   * only within that size. Without it only ENOSPC counts as blocked.
   */
  fill_limits_mib?: Record<string, number>;
  /** Mounted servers: the loopback ports of the workspaces' rclone remote controls (on the host). */
  rc_ports?: number[];
}

export interface Probe {
  name: string;
  /** What the probe tries (for test names and the decision note). */
  tries: string;
  code: string;
  /**
   * `blocked`: the cell completes and every attempt failed. `dies`: the kernel (or its sandbox)
   * dies, and the run ends `failed` with a clear message. `stopped`: the platform stops the cell
   * (it keeps its kernel) and the run ends `failed` with a clear message.
   */
  expect: 'blocked' | 'dies' | 'stopped';
  /** For `dies` and `stopped`: the message the run's error and the execute's error output carry. */
  message?: RegExp;
  /** Needs its own kernel (it exhausts or kills the kernel it runs in). */
  ownKernel?: boolean;
  /**
   * Runs in a workspace of its own: it takes down or fills its workspace's sandbox, which other
   * runs of that same workspace would feel (their own workspace's doing, reported clearly).
   */
  ownWorkspace?: boolean;
}

const PRELUDE = String.raw`
import json, os, socket, sys, errno, subprocess, ctypes, ctypes.util
P = json.loads(__P__)
def blocked(msg): print("BLOCKED", msg)
def leak(msg): print("LEAK", msg)
def write_file(path, text):
    with open(path, "w") as f:
        f.write(text)
def attempt(desc, fn):
    try:
        r = fn()
    except Exception as e:
        blocked(f"{desc}: {type(e).__name__}")
        return None
    leak(f"{desc}: it worked")
    return r
def connect(family, host, port, timeout=1.0):
    s = socket.socket(family, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect((host, port))
        return s.getsockname()[:2] != s.getpeername()[:2]
    except OSError:
        return False
    finally:
        s.close()
libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
`;

export function probeSource(probe: Probe, params: ProbeParams): string {
  return PRELUDE.replace('__P__', JSON.stringify(JSON.stringify(params))) + probe.code;
}

const SECRET_NAMES =
  '["INTERNAL_SERVICE_TOKEN", "JWT_SECRET", "DATABASE_URL", "DATA_DIR", "ADMIN_TOKENS", "SECRETS_KEY", "AGENT_TOKEN", "BOOTSTRAP_ADMIN_PASSWORD", "S3_SECRET_ACCESS_KEY", "JUPYTERLAB_TOKEN", "CODEAGENT_BRIDGE_PASSWORD"]';

const fill = (dir: string) => String.raw`
path = os.path.join(${JSON.stringify(dir)}, "fill-%s.bin" % os.getpid())
written = 0
try:
    with open(path, "wb") as f:
        chunk = b"\0" * (1024 * 1024)
        while written < 64 * 1024:
            f.write(chunk)
            f.flush()
            written += 1
    leak(f"wrote {written} MiB into ${dir} without limit")
except OSError as e:
    limit = (P.get("fill_limits_mib") or {}).get(${JSON.stringify(dir)})
    if e.errno == errno.ENOSPC:
        blocked(f"${dir} full after {written} MiB")
    elif limit is not None and e.errno in (errno.EDQUOT, errno.EIO) and written <= limit:
        blocked(f"${dir} full after {written} MiB ({errno.errorcode[e.errno]}, limit {limit} MiB)")
    else:
        leak(f"unexpected {e} after {written} MiB")
finally:
    if os.path.exists(path):
        os.remove(path)
`;

export const PROBES: Probe[] = [
  {
    name: 'secrets-file',
    tries: 'read DATA_DIR/secrets.json (JWT secret, internal token, admin tokens)',
    expect: 'blocked',
    code: String.raw`attempt("read DATA_DIR/secrets.json", lambda: open(P["data_dir"] + "/secrets.json").read())
attempt("read secrets.json relative to the home", lambda: open(os.path.expanduser("~/../.codeagent/secrets.json")).read())`,
  },
  {
    name: 'data-dir',
    tries: 'list DATA_DIR and its storage directory',
    expect: 'blocked',
    code: String.raw`attempt("list DATA_DIR", lambda: os.listdir(P["data_dir"]))
attempt("list DATA_DIR/storage", lambda: os.listdir(P["data_dir"] + "/storage/workspace"))`,
  },
  {
    name: 'other-workspace-storage',
    tries: "read another workspace's stored file in the storage directory",
    expect: 'blocked',
    code: String.raw`attempt("read another workspace's blob", lambda: open(P["other_blob"], "rb").read())
# The marker is assembled at run time so that this source (in the notebook, in IPython's history) does not hold it.
marker = ("secret of " + "workspace B").encode()
found = []
for root in ["/workspace", "/tmp", "/run"]:
    for d, _, files in os.walk(root):
        for n in files:
            try:
                if marker in open(os.path.join(d, n), "rb").read(1 << 20):
                    found.append(n)
            except OSError:
                pass
if found: leak("another workspace's file content is visible")
else: blocked("no file of another workspace is visible")`,
  },
  {
    name: 'checkout',
    tries: 'read the repository checkout',
    expect: 'blocked',
    code: String.raw`for p in ["package.json", "README.md", "packages/config/src/settings.ts"]:
    attempt("read checkout " + p, lambda: open(P["checkout"] + "/" + p).read())
attempt("list the checkout", lambda: os.listdir(P["checkout"]))`,
  },
  {
    name: 'root-home',
    tries: 'read /root and other homes',
    expect: 'blocked',
    code: String.raw`for p in ["/root", "/home", "/var", "/srv", "/opt", "/mnt"]:
    attempt("list " + p, lambda: os.listdir(p))`,
  },
  {
    name: 'host-accounts',
    tries: "read the machine's /etc/shadow and real /etc/passwd",
    expect: 'blocked',
    code: String.raw`attempt("read /etc/shadow", lambda: open("/etc/shadow").read())
names = [l.split(":")[0] for l in open("/etc/passwd").read().splitlines() if l]
if set(names) - {"user", "nobody"}: leak("the machine's accounts are visible")
else: blocked("/etc/passwd holds only the sandbox user")`,
  },
  {
    name: 'own-environment',
    tries: 'find platform secrets in its own environment',
    expect: 'blocked',
    code: String.raw`bad = [k for k in os.environ if k in ${SECRET_NAMES} or k.startswith("S3_") or k.startswith("CODEAGENT")]
if bad: leak("platform settings in the environment: " + ",".join(bad))
else: blocked("environment names: " + ",".join(sorted(os.environ)))`,
  },
  {
    name: 'proc-environ',
    tries: 'read /proc/*/environ of other processes',
    expect: 'blocked',
    code: String.raw`hits = []
for pid in [p for p in os.listdir("/proc") if p.isdigit()]:
    try:
        env = open(f"/proc/{pid}/environ", "rb").read().decode(errors="replace").split("\0")
    except OSError:
        continue
    for v in env:
        if v.split("=")[0] in ${SECRET_NAMES}:
            hits.append(pid)
if hits: leak("platform secrets in the environment of pids " + ",".join(hits))
else: blocked("no process visible here carries a platform secret")`,
  },
  {
    name: 'proc-cmdline',
    tries: 'find the Jupyter token on a command line (/proc/*/cmdline)',
    expect: 'blocked',
    code: String.raw`hits = []
for pid in [p for p in os.listdir("/proc") if p.isdigit()]:
    try:
        cmd = open(f"/proc/{pid}/cmdline", "rb").read().decode(errors="replace").replace("\0", " ")
    except OSError:
        continue
    if "token" in cmd.lower() or "secret" in cmd.lower() or "password" in cmd.lower():
        hits.append(pid)
if hits: leak("a token on the command line of pids " + ",".join(hits))
else: blocked("no command line carries a token")`,
  },
  {
    name: 'process-visibility',
    tries: "see the platform's processes",
    expect: 'blocked',
    code: String.raw`seen = []
for pid in [p for p in os.listdir("/proc") if p.isdigit()]:
    try:
        seen.append(open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")[0].decode(errors="replace"))
    except OSError:
        pass
foreign = [c for c in seen if any(w in c for w in ["node", "postgres", "vitest", "npm", "systemd", "sshd"])]
if foreign: leak(f"platform processes visible: {len(foreign)}")
else: blocked(f"only the sandbox's {len(seen)} processes are visible")
for pid in P["platform_pids"]:
    attempt(f"open /proc/{pid}/environ", lambda: open(f"/proc/{pid}/environ").read())`,
  },
  {
    name: 'signal-platform',
    tries: 'kill platform processes by pid',
    expect: 'blocked',
    code: String.raw`import signal
for pid in P["platform_pids"]:
    attempt(f"kill({pid}, SIGKILL)", lambda: os.kill(pid, signal.SIGKILL))`,
  },
  {
    name: 'kill-everything',
    tries: 'kill every process it can signal (kill -1)',
    expect: 'dies',
    message: /Jupyter server stopped|kernel died|connection was lost/,
    ownKernel: true,
    ownWorkspace: true,
    code: String.raw`import signal
os.kill(-1, signal.SIGKILL)
import time
time.sleep(5)
leak("still alive after kill -1")`,
  },
  {
    name: 'write-outside',
    tries: 'write outside the workspace (system directories, DATA_DIR, the checkout)',
    expect: 'blocked',
    code: String.raw`for p in ["/usr/pwned", "/etc/pwned", "/pwned", "/var/pwned", "/home/pwned", "/root/pwned", "/proc/pwned", "/dev/pwned", "/sbin/pwned", P["data_dir"] + "/pwned", P["checkout"] + "/pwned"]:
    attempt("write " + p, lambda: write_file(p, "pwned"))`,
  },
  {
    name: 'private-tmp',
    tries: "write into the host's /tmp",
    expect: 'blocked',
    code: String.raw`with open("/tmp/" + P["nonce"], "w") as f:
    f.write("escaped?")
blocked("wrote /tmp/" + P["nonce"] + " inside (the test checks the host's /tmp)")`,
  },
  {
    name: 'connect-backend-runtime',
    tries: "connect to the backend's and the runtime's ports over IPv4 and IPv6 loopback",
    expect: 'blocked',
    code: String.raw`for port in P["ports"]:
    for fam, host in [(socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")]:
        if connect(fam, host, port): leak(f"connected to {host}:{port}")
        else: blocked(f"{host}:{port} unreachable")`,
  },
  {
    name: 'connect-database',
    tries: "connect to the machine's PostgreSQL (TCP 5432 over IPv4 and IPv6, its Unix socket)",
    expect: 'blocked',
    code: String.raw`for fam, host in [(socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")]:
    if connect(fam, host, 5432): leak(f"connected to PostgreSQL at {host}")
    else: blocked(f"PostgreSQL at {host}:5432 unreachable")
def unix_pg():
    s = socket.socket(socket.AF_UNIX)
    s.connect("/var/run/postgresql/.s.PGSQL.5432")
attempt("PostgreSQL's Unix socket", unix_pg)`,
  },
  {
    name: 'connect-default-ports',
    tries: 'connect to every default platform port (8080, 8091–8095) and common service ports',
    expect: 'blocked',
    code: String.raw`ports = list(range(8080, 8096)) + [22, 80, 443, 2375, 3000, 5000, 5432, 6379, 8888, 9000, 27017]
hits = [p for p in ports for fam, h in [(socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")] if connect(fam, h, p, 0.5)]
if hits: leak(f"open ports: {hits}")
else: blocked(f"{len(ports)} ports closed on both loopbacks")`,
  },
  {
    name: 'loopback-scan',
    tries: 'scan every TCP port of the loopback interface for a foreign listener',
    expect: 'blocked',
    code: String.raw`def own_listeners():
    # /proc/net/tcp lists the sockets of this network namespace only: the sandbox's own
    # (its kernels' debug ports; several kernels of the workspace come and go during the scan)
    ports = set()
    for f in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in open(f).read().splitlines()[1:]:
            parts = line.split()
            if parts[3] == "0A":
                ports.add(int(parts[1].split(":")[-1], 16))
    return ports
foreign = []
own = 0
for port in range(1, 65536):
    s = socket.socket()
    s.settimeout(0.2)
    # A connect to a port of the ephemeral range can pick that same port as its source and
    # "connect" to itself (TCP simultaneous open): that is no listener.
    if s.connect_ex(("127.0.0.1", port)) == 0 and s.getsockname() != s.getpeername():
        if port in own_listeners(): own += 1
        else: foreign.append(port)
    s.close()
if foreign: leak(f"foreign ports answer on 127.0.0.1: {foreign[:20]}")
else: blocked(f"no foreign TCP port answers on the loopback (the sandbox's own: {own})")`,
  },
  {
    name: 'egress',
    tries: 'reach the internet and DNS',
    expect: 'blocked',
    code: String.raw`for fam, host, port in [(socket.AF_INET, "1.1.1.1", 443), (socket.AF_INET, "8.8.8.8", 53), (socket.AF_INET6, "2606:4700:4700::1111", 443), (socket.AF_INET, "169.254.169.254", 80)]:
    if connect(fam, host, port, 2): leak(f"reached {host}:{port}")
    else: blocked(f"{host}:{port} unreachable")
attempt("resolve example.com", lambda: socket.getaddrinfo("example.com", 443))
ifaces = [n for _, n in socket.if_nameindex()]
if ifaces != ["lo"]: leak(f"interfaces {ifaces}")
else: blocked("only its own loopback interface")`,
  },
  {
    name: 'other-jupyter-server',
    tries: "reach another workspace's Jupyter server (its socket) or any foreign Unix socket",
    expect: 'blocked',
    code: String.raw`def other():
    s = socket.socket(socket.AF_UNIX)
    s.connect(P["other_jupyter_socket"])
attempt("connect to another workspace's Jupyter socket", other)
paths = set()
for line in open("/proc/net/unix").read().splitlines()[1:]:
    parts = line.split()
    if len(parts) >= 8 and parts[7].startswith("/"):
        paths.add(parts[7])
foreign = [p for p in paths if not p.startswith("/run/")]
if foreign: leak(f"foreign sockets visible: {len(foreign)}")
else: blocked(f"only its own sockets: {sorted(paths)[:5]}")`,
  },
  {
    name: 'other-kernel-channels',
    tries: "connect to another kernel's ZMQ channels",
    expect: 'blocked',
    code: String.raw`import glob, zmq
kid = P["other_kernel"]
if glob.glob(f"/run/kernel-{kid}*") or glob.glob(f"/tmp/**/kernel-{kid}*", recursive=True): leak("the other kernel's connection file or channels are visible")
else: blocked("the other kernel's connection file and ipc channels are not visible")
ctx = zmq.Context()
s = ctx.socket(zmq.DEALER)
s.setsockopt(zmq.LINGER, 0)
s.connect(f"ipc:///run/kernel-{kid}-ipc-1")
s.send_multipart([b"<IDS|MSG>", b"", b'{"msg_id":"x","msg_type":"kernel_info_request","username":"u","session":"s","version":"5.3"}', b"{}", b"{}", b"{}"])
if s.poll(1500): leak("the other kernel answered")
else: blocked("no answer from the other kernel's shell channel")
s.close()`,
  },
  {
    name: 'own-server-needs-token',
    tries: "use its own workspace's Jupyter server without the token",
    expect: 'blocked',
    code: String.raw`answers = []
for base in ["/"] + P["jupyter_base_paths"]:
    s = socket.socket(socket.AF_UNIX)
    s.connect("/run/jupyter.sock")
    s.sendall(("GET " + base + "api/kernels HTTP/1.0\r\nHost: localhost\r\n\r\n").encode())
    head = s.recv(100).decode(errors="replace").split("\r\n")[0]
    s.close()
    answers.append(base + ": " + head)
refused = [a for a in answers if " 403 " in a]
if refused and all(" 403 " in a or " 404 " in a for a in answers): blocked("the server refuses requests without its token: " + "; ".join(answers))
else: leak("the server answered without a token: " + "; ".join(answers))`,
  },
  {
    name: 'setuid',
    tries: 'gain root through setuid binaries or setuid()',
    expect: 'blocked',
    code: String.raw`attempt("setuid(0)", lambda: os.setuid(0))
attempt("setgid(0)", lambda: os.setgid(0))
for cmd in (["/usr/bin/su", "-c", "id -u"], ["/usr/bin/sudo", "-n", "id", "-u"], ["/usr/bin/newgrp", "root"], ["/usr/bin/mount", "-t", "tmpfs", "none", "/tmp"], ["/usr/bin/passwd", "-d", "root"]):
    if not os.path.exists(cmd[0]):
        blocked(cmd[0] + " does not exist here")
        continue
    r = subprocess.run(cmd, capture_output=True, timeout=10, stdin=subprocess.DEVNULL)
    if r.returncode == 0 and (b"\n0\n" in b"\n" + r.stdout or cmd[0].endswith("mount") or cmd[0].endswith("passwd")): leak(cmd[0] + " worked")
    else: blocked(cmd[0] + " failed")
if os.geteuid() == 0: leak("running as root")
else: blocked(f"still uid {os.geteuid()}")`,
  },
  {
    name: 'namespaces',
    tries: 'create new user, mount or network namespaces (unshare)',
    expect: 'blocked',
    code: String.raw`for args in (["-U"], ["-r"], ["-m"], ["-n"], ["-p", "-f"], ["-U", "-r", "-m"]):
    r = subprocess.run(["/usr/bin/unshare", *args, "true"], capture_output=True, timeout=10)
    if r.returncode == 0: leak("unshare " + " ".join(args) + " worked")
    else: blocked("unshare " + " ".join(args) + " refused")
CLONE_NEWUSER = 0x10000000
if libc.unshare(CLONE_NEWUSER) == 0: leak("unshare(CLONE_NEWUSER) worked")
else: blocked("unshare(CLONE_NEWUSER): " + os.strerror(ctypes.get_errno()))`,
  },
  {
    name: 'ptrace',
    tries: 'ptrace or read the memory of platform processes',
    expect: 'blocked',
    code: String.raw`PTRACE_ATTACH = 16
for pid in P["platform_pids"]:
    if libc.ptrace(PTRACE_ATTACH, pid, None, None) == 0: leak(f"attached to {pid}")
    else: blocked(f"ptrace({pid}): " + os.strerror(ctypes.get_errno()))
    attempt(f"read /proc/{pid}/mem", lambda: open(f"/proc/{pid}/mem", "rb").read(1))`,
  },
  {
    name: 'kernel-interfaces',
    tries: 'reach the kernel: sysrq, kcore, /sys, /dev/mem, mount, chroot, sethostname, oom_score_adj',
    expect: 'blocked',
    code: String.raw`attempt("write /proc/sysrq-trigger", lambda: write_file("/proc/sysrq-trigger", "s"))
attempt("read /proc/kcore", lambda: open("/proc/kcore", "rb").read(16))
attempt("list /sys", lambda: os.listdir("/sys"))
attempt("read /dev/mem", lambda: open("/dev/mem", "rb").read(1))
attempt("chroot", lambda: os.chroot("/tmp"))
if libc.mount(b"none", b"/tmp", b"tmpfs", 0, None) == 0: leak("mount worked")
else: blocked("mount: " + os.strerror(ctypes.get_errno()))
if libc.sethostname(b"pwned", 5) == 0: leak("sethostname worked")
else: blocked("sethostname: " + os.strerror(ctypes.get_errno()))
attempt("escape the OOM killer (oom_score_adj -1000)", lambda: write_file("/proc/self/oom_score_adj", "-1000"))
if open("/proc/self/oom_score_adj").read().strip() == "-1000": leak("oom_score_adj is -1000")
import resource
soft, hard = resource.getrlimit(resource.RLIMIT_CORE)
if hard != 0: leak(f"core dumps allowed ({hard})")
else: blocked("no core dumps")`,
  },
  {
    name: 'raw-network',
    tries: 'open raw and packet sockets',
    expect: 'blocked',
    code: String.raw`attempt("AF_PACKET raw socket", lambda: socket.socket(socket.AF_PACKET, socket.SOCK_RAW))
attempt("raw ICMP socket", lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP))
r = subprocess.run(["/usr/sbin/ip", "link", "add", "x0", "type", "dummy"], capture_output=True) if os.path.exists("/usr/sbin/ip") else None
if r is not None and r.returncode == 0: leak("created a network interface")
else: blocked("no new network interfaces")`,
  },
  {
    name: 'fork-bomb',
    tries: 'a fork bomb (children in new sessions, to escape process-group kills)',
    expect: 'blocked',
    ownKernel: true,
    code: String.raw`import time
n = 0
for _ in range(100000):
    try:
        if os.fork() == 0:
            os.setsid()
            time.sleep(600)
            os._exit(0)
        n += 1
    except OSError as e:
        blocked(f"fork refused after {n} processes: {e.strerror}")
        break
else:
    leak("forked 100000 processes")`,
  },
  {
    name: 'memory-hog',
    tries: 'allocate far more memory than its limit',
    expect: 'dies',
    message: /ran out of memory/,
    ownKernel: true,
    code: String.raw`hog = []
for _ in range(64):
    hog.append(bytearray(256 * 1024 * 1024))
leak(f"allocated {len(hog) / 4} GiB")`,
  },
  {
    name: 'output-flood',
    tries: "flood the runtime's memory with output (stdout and display data)",
    expect: 'stopped',
    message: /OutputLimitError: the cell's output exceeded \d+ MiB/,
    code: String.raw`from IPython.display import display
line = "x" * (1024 * 1024)
for i in range(100000):
    print(line)
    if i % 10 == 0:
        display({"text/plain": line}, raw=True)
leak("printed 100 GB")`,
  },
  {
    name: 'signed-message-flood',
    tries: "keep the runtime busy with large messages signed with the kernel's own key, for no request of the runtime's and padded ones for its own",
    expect: 'stopped',
    message: /OutputLimitError: the cell's output exceeded \d+ MiB.* no output of this cell/,
    code: String.raw`import time
k = get_ipython().kernel
junk = "j" * (1 << 20)
started, sent = time.time(), 0
while time.time() - started < 60:
    k.session.send(k.iopub_socket, "stream", {"name": "stdout", "text": junk}, parent={"header": {"msg_id": "junk"}})
    k.session.send(k.iopub_socket, "comm_msg", {"comm_id": "c", "data": {"junk": junk}}, parent=k.get_parent())
    sent += 2
    time.sleep(0.01)
leak(f"sent {sent} signed messages of 1 MiB for 60 s without being stopped")`,
  },
  { name: 'fill-workspace', tries: 'fill the disk through the workspace directory', expect: 'blocked', ownWorkspace: true, code: fill('/workspace') },
  { name: 'fill-tmp', tries: 'fill the disk through /tmp', expect: 'blocked', ownWorkspace: true, code: fill('/tmp') },
  { name: 'fill-shm', tries: 'fill memory through /dev/shm', expect: 'blocked', ownWorkspace: true, code: fill('/dev/shm') },
  {
    name: 'cgroup-escape',
    tries: 'leave or raise its cgroup limits',
    expect: 'blocked',
    code: String.raw`attempt("list /sys/fs/cgroup", lambda: os.listdir("/sys/fs/cgroup"))
attempt("write its own memory limit", lambda: write_file("/sys/fs/cgroup/memory/memory.limit_in_bytes", "-1"))
cg = open("/proc/self/cgroup").read()
blocked("cgroup view: " + " ".join(l.split(":", 2)[-1] for l in cg.splitlines()[:3]))`,
  },
];

/**
 * Probes of what the workspace mount adds (decision 0141): they run on mounted servers only, in
 * the workspace's own `probes/` folder (the notebook's directory, on the mount).
 */
export const MOUNT_PROBES: Probe[] = [
  {
    name: 'mount-token',
    tries: 'find the mount token or rclone settings in any visible /proc environ or cmdline, or in /workspace',
    expect: 'blocked',
    // The markers are assembled at run time: this source itself is in the workspace (the notebook).
    code: String.raw`markers = [b"mnt" + b".", b"RCLONE" + b"_", b"bearer" + b"_token"]
hits = []
for pid in [p for p in os.listdir("/proc") if p.isdigit()]:
    for f in ("environ", "cmdline"):
        try:
            data = open(f"/proc/{pid}/{f}", "rb").read()
        except OSError:
            continue
        if any(m in data for m in markers): hits.append(f"{pid}/{f}")
for d, _, files in os.walk("/workspace"):
    for n in files:
        if n.endswith(".ipynb"): continue
        try:
            if any(m in open(os.path.join(d, n), "rb").read(1 << 20) for m in markers): hits.append(n)
        except OSError:
            pass
if hits: leak(f"mount token or rclone settings visible: {hits[:5]}")
else: blocked("no mount token or rclone setting is visible")`,
  },
  {
    name: 'rclone-remote-control',
    tries: 'reach the rclone remote controls (host loopback) from the sandbox, on both loopbacks, with no credentials',
    expect: 'blocked',
    code: String.raw`import urllib.request
ports = P.get("rc_ports") or []
if not ports: leak("the test gave no rclone remote-control port")
for port in ports:
    for host in ["127.0.0.1", "[::1]"]:
        try:
            urllib.request.urlopen(urllib.request.Request(f"http://{host}:{port}/rc/noop", data=b"{}", method="POST"), timeout=2)
            leak(f"rclone's remote control answered on {host}:{port}")
        except urllib.error.HTTPError as e:
            leak(f"rclone's remote control answered {e.code} on {host}:{port}")
        except Exception as e:
            blocked(f"{host}:{port} unreachable: {type(e).__name__}")`,
  },
  {
    name: 'other-mounts',
    tries: "reach another workspace's mount, rclone's state (tokens, cache) or the mounts below DATA_DIR",
    expect: 'blocked',
    code: String.raw`for p in [P["data_dir"] + "/mounts", P["data_dir"] + "/mount-state", "/proc/self/root" + P["data_dir"] + "/mounts"]:
    attempt("list " + p, lambda: os.listdir(p))
mounts = open("/proc/self/mountinfo").read()
if P["data_dir"] in mounts: leak("DATA_DIR paths in the sandbox's mount table")
else: blocked("the mount table names no DATA_DIR path")
fuse = [l for l in mounts.splitlines() if "fuse" in l]
if len(fuse) > 1: leak(f"{len(fuse)} FUSE mounts visible")
else: blocked(f"{len(fuse)} FUSE mount visible (its own /workspace)")`,
  },
  {
    name: 'mount-special-files',
    tries: 'write symlinks, hard links, fifos, device nodes, setuid files and traversal names through the mount',
    expect: 'blocked',
    code: String.raw`import stat
base = "/workspace/probes/special"
os.makedirs(base, exist_ok=True)
write_file(base + "/plain.txt", "plain")
attempt("symlink to /etc/passwd", lambda: os.symlink("/etc/passwd", base + "/link"))
attempt("symlink out of the workspace", lambda: os.symlink("../../../../../" + P["data_dir"].lstrip("/"), base + "/up"))
attempt("hard link", lambda: os.link(base + "/plain.txt", base + "/hard"))
attempt("fifo", lambda: os.mkfifo(base + "/fifo"))
attempt("character device", lambda: os.mknod(base + "/null", 0o666 | stat.S_IFCHR, os.makedev(1, 3)))
def setuid():
    write_file(base + "/suid", "#!/bin/sh\nid\n")
    os.chmod(base + "/suid", 0o4755)
    if not os.stat(base + "/suid").st_mode & stat.S_ISUID: raise PermissionError("the setuid bit was dropped")
attempt("setuid executable", setuid)
# Traversal names: legal names here; they stay, and the test checks where the platform stored them.
traversal = ["..%2f..%2fpwned", "..%5cpwned", "%2e%2e%2fpwned"]
for name in traversal:
    try:
        write_file(base + "/" + name, "pwned")
        blocked("wrote " + name + " (stored as a plain name, the test checks)")
    except OSError as e:
        blocked(f"{name} refused: {type(e).__name__}")
for n in set(os.listdir(base)) - set(traversal):
    p = os.path.join(base, n)
    try:
        (os.rmdir if os.path.isdir(p) and not os.path.islink(p) else os.remove)(p)
    except OSError:
        pass`,
  },
];

/**
 * Files and sockets the platform reaches inside a sandbox (a Jupyter server's socket, a kernel's
 * connection file and ipc sockets), through `/proc/<pid>/root/…` (`Sandbox.hostPath`). The
 * sandbox's code can replace any of them: with a symlink, which the platform (root, or at least
 * outside the sandbox) would resolve against the host's root (`/etc/shadow`, a Docker socket), or
 * with a FIFO, whose opening blocks a thread of the platform's pool for good (decision 0253). So
 * the last component is never followed, and its kind is checked on what was opened: the checked
 * inode is the one read or connected to, with no window to swap it in between. The components
 * before it are the sandbox's mount points (`/run` on a read-only root), which its code cannot
 * replace.
 */
import { closeSync, constants, fstatSync, openSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { Socket, connect } from 'node:net';

/** Linux's O_PATH (not in Node's `fs.constants`): a handle on the inode itself, opened for nothing (libuv adds O_CLOEXEC). */
const O_PATH = 0o10000000;

/** What is at a sandbox's path is not what the platform expects there. */
export class SandboxPathError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SandboxPathError';
  }
}

/** A socket that fails with `err` once its listeners are attached. */
function failed(err: Error): Socket {
  const socket = new Socket();
  process.nextTick(() => socket.destroy(err));
  return socket;
}

/**
 * A handle on the Unix socket at `path` (a host path into a sandbox), and an address that
 * connects to exactly it while the handle is open (`/proc/self/fd/<n>`): a symlink or anything
 * but a socket there throws SandboxPathError, a missing one ENOENT.
 */
export function pinSocket(path: string): { address: string; close: () => void } {
  const fd = openSync(path, O_PATH | constants.O_NOFOLLOW);
  let kind: string;
  try {
    const st = fstatSync(fd);
    kind = st.isSocket() ? 'socket' : st.isSymbolicLink() ? 'symlink' : 'other';
  } catch (err) {
    closeSync(fd);
    throw err;
  }
  if (kind !== 'socket') {
    closeSync(fd);
    throw new SandboxPathError(`${path} is ${kind === 'symlink' ? 'a symlink' : 'not a socket'}: the sandbox's code replaced it`);
  }
  let open = true;
  return {
    address: `/proc/self/fd/${fd}`,
    close: () => {
      if (open) closeSync(fd);
      open = false;
    },
  };
}

/** A connection to the Unix socket at `path` inside a sandbox, as `net.connect(path)` but never through a symlink or to anything else. */
export function connectInside(path: string): Socket {
  let pinned: ReturnType<typeof pinSocket>;
  try {
    pinned = pinSocket(path);
  } catch (err) {
    return failed(err as Error);
  }
  const socket = connect(pinned.address);
  // Connected (or not), the socket holds what it reached: the handle is no longer needed.
  socket.once('connect', pinned.close);
  socket.once('error', pinned.close);
  socket.once('close', pinned.close);
  return socket;
}

/**
 * The text of the regular file at `path` inside a sandbox, at most `maxBytes` (else
 * SandboxPathError): a symlink, a FIFO or a device there is refused without waiting on it.
 */
export async function readInside(path: string, maxBytes: number): Promise<string> {
  const handle = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK).catch((err: NodeJS.ErrnoException) => {
    // O_NOFOLLOW on a symlink: ELOOP.
    throw err.code === 'ELOOP' ? new SandboxPathError(`${path} is a symlink: the sandbox's code replaced it`) : err;
  });
  try {
    const st = await handle.stat();
    if (!st.isFile()) throw new SandboxPathError(`${path} is not a regular file: the sandbox's code replaced it`);
    if (st.size > maxBytes) throw new SandboxPathError(`${path} is larger than ${maxBytes} bytes`);
    const buffer = Buffer.alloc(maxBytes + 1);
    let length = 0;
    for (;;) {
      const { bytesRead } = await handle.read(buffer, length, buffer.length - length, length);
      if (bytesRead === 0) break;
      length += bytesRead;
      // (It grew while read.)
      if (length > maxBytes) throw new SandboxPathError(`${path} is larger than ${maxBytes} bytes`);
    }
    return buffer.subarray(0, length).toString('utf8');
  } finally {
    await handle.close();
  }
}

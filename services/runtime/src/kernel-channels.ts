import { createHmac, randomUUID, timingSafeEqual } from 'node:crypto';
import { pinSocket, readInside } from '@codeagent/sandbox/inside';
import type { KernelMessage } from '@jupyterlab/services';
import type { Dealer, Subscriber } from 'zeromq';

/**
 * The shell and IOPub channels of one kernel, spoken over ZeroMQ straight to the kernel's `ipc`
 * sockets, without the Jupyter server's websocket relay in between (issue 17: the relay cost
 * about 2 ms of a 7.6 ms round trip; decision 0190). The Jupyter server still starts, interrupts,
 * restarts, culls and stops the kernel, and still reports its deaths; only `execute_request`
 * and what answers it travel here.
 *
 * What a hostile kernel can do with this: the kernel is the workspace's own code, and everything
 * here is the workspace's own business. Every message received is checked against the kernel's
 * HMAC key and dropped when the signature is wrong, so a socket path the workspace redirects (a
 * symlink to another workspace's kernel) yields nothing of that kernel; messages are bounded in
 * size and in number queued.
 *
 * The kernel's own code holds its key, so it can sign anything: a flood of large messages for no
 * request of the runtime's, or padded ones for its own, would keep the runtime (shared by every
 * workspace) busy checking and parsing them until the execution's timeout. So a message is read
 * only as far as it must be: its small frames (header, parent header, metadata) are refused unread
 * beyond MAX_FRAME_BYTES, then the signature is checked, then only the parent header is parsed,
 * and the rest only for a message of an execution under way, of a type it reads. Every byte
 * received while an execution is under way is told to it, outputs with their size and the rest as
 * stray bytes, for its caller to count against the cell's output limit (kernels.ts); bytes while
 * none is under way close the channels beyond MAX_IDLE_STRAY_BYTES (the next execute opens them again).
 */

/** The `zeromq` package, loaded on first use (a native addon: importing the runtime stays light). */
let zmq: ReturnType<typeof loadZmqNow> | undefined;
const loadZmqNow = () => import('zeromq');
const loadZmq = () => (zmq ??= loadZmqNow());

const DELIMITER = Buffer.from('<IDS|MSG>');
/**
 * One message at most. Beyond it ZeroMQ drops the connection instead of the message, and the
 * execution would wait for its timeout: well above the runtime's 32 MiB output cap, which the
 * caller enforces by counting (as the Jupyter server's websocket allows 100 MiB).
 */
const MAX_MESSAGE_BYTES = 128 * 1024 * 1024;
/** Messages queued on each socket before the kernel's side drops them (bounds the memory a flood takes). */
const RECEIVE_QUEUE = 16;
/**
 * The header, parent header and metadata of a message at most: only its content may be large. A
 * message with a larger one is refused before anything of it is read, its signature included.
 */
export const MAX_FRAME_BYTES = 64 * 1024;
/**
 * What a message's envelope may take on the wire (delimiter, signature, header, parent header,
 * metadata: well under 1 KiB from ipykernel): a message of an execution's own counts only beyond it,
 * so that its status, replies and progress messages (comm messages of widgets) cost nothing.
 */
export const ENVELOPE_BYTES = 4096;
/**
 * Stray bytes received while no execution is under way, over the channels' life (a thread of the
 * kernel's still printing, a JupyterLab sharing the kernel, a flood of signed messages), after which
 * the channels close; the next execute opens them again.
 */
const MAX_IDLE_STRAY_BYTES = 32 * 1024 * 1024;
/** What an execution reads on IOPub (the rest of its own messages is dropped unparsed): its outputs, and what ends or numbers it. */
const IOPUB_READ = new Set(['stream', 'display_data', 'execute_result', 'error', 'clear_output', 'status', 'execute_input']);
/** How long to wait for the IOPub subscription to show the kernel's status (ZeroMQ's "slow joiner"). */
const JOIN_TIMEOUT_MS = 10_000;

/** What the kernel's connection file must say for the runtime to use it (and nothing else). */
export interface ConnectionInfo {
  shell_port: number;
  iopub_port: number;
  ip: string;
  key: string;
  transport: string;
  signature_scheme: string;
}

/**
 * Reads and checks a kernel's connection file. The file lives in the sandbox, writable by the
 * workspace's code, so nothing in it is trusted beyond the key: it must be a regular file of at
 * most 4 KiB (not a symlink out of the sandbox, not a FIFO that blocks the reader: readInside,
 * decision 0253), the transport `ipc`, the socket prefix exactly the one the Jupyter server
 * gives this kernel, the ports small integers. No error says what the file holds.
 */
export async function readConnection(file: string, expectedIp: string): Promise<ConnectionInfo> {
  const text = await readInside(file, 4096);
  let info: Partial<ConnectionInfo>;
  try {
    info = JSON.parse(text) as Partial<ConnectionInfo>;
  } catch {
    throw new Error('the kernel connection file is not JSON');
  }
  if (typeof info !== 'object' || info === null) throw new Error('the kernel connection file is not a JSON object');
  const port = (p: unknown) => typeof p === 'number' && Number.isInteger(p) && p > 0 && p < 65536;
  if (info.transport !== 'ipc') throw new Error('the kernel does not use the ipc transport');
  if (info.ip !== expectedIp) throw new Error('the kernel connection file names other sockets');
  if (info.signature_scheme !== 'hmac-sha256') throw new Error('the kernel does not sign with hmac-sha256');
  if (typeof info.key !== 'string' || info.key.length === 0 || info.key.length > 256) throw new Error('the kernel connection file has no usable key');
  if (!port(info.shell_port) || !port(info.iopub_port)) throw new Error('the kernel connection file has no usable ports');
  return info as ConnectionInfo;
}

/**
 * The kernel's socket at `path`, pinned (pinSocket) once the kernel has bound it: a kernel just
 * started may not have yet (ZeroMQ would have kept trying to connect). Anything but a socket
 * there fails at once.
 */
async function socketWhenBound(path: string): Promise<ReturnType<typeof pinSocket>> {
  const deadline = Date.now() + JOIN_TIMEOUT_MS;
  for (;;) {
    try {
      return pinSocket(path);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      if (Date.now() > deadline) throw new Error(`the kernel did not open its socket ${path} within ${JOIN_TIMEOUT_MS / 1000} s`, { cause: err });
      await new Promise((r) => setTimeout(r, 20));
    }
  }
}

type Message = KernelMessage.IMessage;

interface Pending {
  onIOPub: (msg: KernelMessage.IIOPubMessage, bytes: number) => void;
  onStray: (bytes: number) => void;
  /** The kernel's echo of the request (its first `execute_input`: the runtime's own code) came. */
  echoed: boolean;
  reply?: KernelMessage.IExecuteReplyMsg;
  idle: boolean;
  resolve: (reply: KernelMessage.IExecuteReplyMsg) => void;
  reject: (err: Error) => void;
}

export interface ChannelExecution {
  /** The kernel's `execute_reply`, once it and the IOPub `idle` of the request have arrived. */
  readonly done: Promise<KernelMessage.IExecuteReplyMsg>;
  dispose(): void;
}

export class KernelChannels {
  private readonly session = randomUUID();
  private readonly pending = new Map<string, Pending>();
  private readonly joins = new Map<string, () => void>();
  private closed = false;
  /** Stray bytes received while no execution was under way (MAX_IDLE_STRAY_BYTES). */
  private idleStray = 0;

  private constructor(
    private readonly key: Buffer,
    private readonly shell: Dealer,
    private readonly iopub: Subscriber,
    /** The kernel's two sockets as opened (pinSocket): ZeroMQ reconnects to exactly them, while the channels live. */
    private readonly pinned: ReadonlyArray<{ close(): void }>,
  ) {
    void this.receive(this.shell, 'shell');
    void this.receive(this.iopub, 'iopub');
  }

  /**
   * Connects to the kernel's shell and IOPub sockets (`<socketPrefix>-<port>`, a host path) and
   * waits until IOPub delivers: a `kernel_info_request` is sent until its `status` shows there.
   */
  static async open(info: ConnectionInfo, socketPrefix: string): Promise<KernelChannels> {
    const { Dealer, Subscriber } = await loadZmq();
    // The sockets are files of the sandbox its code can replace (by a symlink to a host socket):
    // connected to as they were opened and checked, never by their path (decision 0253).
    const shellSocket = await socketWhenBound(`${socketPrefix}-${info.shell_port}`);
    let iopubSocket: ReturnType<typeof pinSocket>;
    try {
      iopubSocket = await socketWhenBound(`${socketPrefix}-${info.iopub_port}`);
    } catch (err) {
      shellSocket.close();
      throw err;
    }
    const shell = new Dealer({ maxMessageSize: MAX_MESSAGE_BYTES, receiveHighWaterMark: RECEIVE_QUEUE, linger: 0 });
    const iopub = new Subscriber({ maxMessageSize: MAX_MESSAGE_BYTES, receiveHighWaterMark: RECEIVE_QUEUE, linger: 0 });
    shell.connect(`ipc://${shellSocket.address}`);
    iopub.connect(`ipc://${iopubSocket.address}`);
    iopub.subscribe();
    const channels = new KernelChannels(Buffer.from(info.key, 'utf8'), shell, iopub, [shellSocket, iopubSocket]);
    try {
      await channels.join();
    } catch (err) {
      channels.close();
      throw err;
    }
    return channels;
  }

  get isOpen(): boolean {
    return !this.closed;
  }

  private async join(): Promise<void> {
    const deadline = Date.now() + JOIN_TIMEOUT_MS;
    for (let wait = 50; ; wait = Math.min(wait * 2, 500)) {
      const header = this.header('kernel_info_request');
      const seen = new Promise<boolean>((resolve) => {
        const timer = setTimeout(() => resolve(false), wait);
        this.joins.set(header.msg_id, () => {
          clearTimeout(timer);
          resolve(true);
        });
      });
      await this.send(header, {});
      const ok = await seen;
      this.joins.delete(header.msg_id);
      if (ok) return;
      if (this.closed) throw new Error('the kernel channels were closed');
      if (Date.now() > deadline) throw new Error("the kernel's IOPub channel did not answer");
    }
  }

  /**
   * Sends an `execute_request`. Until `done`, the IOPub messages of it that it reads (IOPUB_READ)
   * go to `onIOPub` with their size on the wire (0 for the kernel's echo of the request's code),
   * and the size of every other message received goes to `onStray`: messages for other requests
   * or none and refused ones in full, its own other messages (its reply, comm messages) beyond
   * ENVELOPE_BYTES. The caller counts both against what the execution may make the runtime read.
   */
  execute(
    content: KernelMessage.IExecuteRequestMsg['content'],
    onIOPub: (msg: KernelMessage.IIOPubMessage, bytes: number) => void,
    onStray: (bytes: number) => void,
  ): ChannelExecution {
    const header = this.header('execute_request');
    const id = header.msg_id;
    const done = new Promise<KernelMessage.IExecuteReplyMsg>((resolve, reject) => {
      this.pending.set(id, { onIOPub, onStray, echoed: false, idle: false, resolve, reject });
    });
    // ipykernel reads every field of the request: the protocol's defaults where the caller gave none.
    const full = { silent: false, store_history: true, user_expressions: {}, allow_stdin: false, stop_on_error: true, ...content };
    this.send(header, full).catch((err: unknown) => this.fail(id, err as Error));
    return {
      done,
      dispose: () => {
        this.pending.delete(id);
      },
    };
  }

  /** Closes both sockets; what is pending fails. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.shell.close();
    this.iopub.close();
    // (A moment later: ZeroMQ ends its sockets in its own thread, and a reconnect there must not
    // reach another file under the same descriptor number.)
    setTimeout(() => {
      for (const socket of this.pinned) socket.close();
    }, 1000).unref();
    for (const id of [...this.pending.keys()]) this.fail(id, new Error("the kernel's channels were closed"));
  }

  private header(msgType: string): KernelMessage.IHeader {
    return {
      msg_id: randomUUID(),
      msg_type: msgType as KernelMessage.MessageType,
      username: 'codeagent',
      session: this.session,
      date: new Date().toISOString(),
      version: '5.3',
    };
  }

  private sign(parts: readonly Buffer[]): Buffer {
    const hmac = createHmac('sha256', this.key);
    for (const p of parts) hmac.update(p);
    return Buffer.from(hmac.digest('hex'), 'ascii');
  }

  private async send(header: KernelMessage.IHeader, content: object): Promise<void> {
    const parts = [header, {}, {}, content].map((p) => Buffer.from(JSON.stringify(p), 'utf8'));
    await this.shell.send([DELIMITER, this.sign(parts), ...parts]);
  }

  private fail(id: string, err: Error): void {
    const p = this.pending.get(id);
    if (!p) return;
    this.pending.delete(id);
    p.reject(err);
  }

  /**
   * The signed frames of a received message (header, parent header, metadata, content), none of
   * them parsed; undefined when it is malformed, has a small frame beyond MAX_FRAME_BYTES (refused
   * before the signature is computed) or is not signed with the kernel's key.
   */
  private verify(frames: Buffer[]): [Buffer, Buffer, Buffer, Buffer] | undefined {
    const at = frames.findIndex((f) => f.equals(DELIMITER));
    if (at < 0 || frames.length < at + 6) return undefined;
    const [signature, ...parts] = frames.slice(at + 1, at + 6) as [Buffer, Buffer, Buffer, Buffer, Buffer];
    if (parts[0].length > MAX_FRAME_BYTES || parts[1].length > MAX_FRAME_BYTES || parts[2].length > MAX_FRAME_BYTES) return undefined;
    const expected = this.sign(parts);
    if (signature.length !== expected.length || !timingSafeEqual(signature, expected)) return undefined;
    return parts;
  }

  private async receive(socket: Dealer | Subscriber, channel: 'shell' | 'iopub'): Promise<void> {
    try {
      for await (const frames of socket) {
        if (this.closed) break;
        this.take(frames, channel);
      }
    } catch {
      // closed
    }
  }

  /** Bytes of messages that are no execution's to read: told to each execution under way, or counted while none is. */
  private stray(bytes: number): void {
    if (this.pending.size > 0) {
      for (const p of [...this.pending.values()]) p.onStray(bytes);
      return;
    }
    this.idleStray += bytes;
    if (this.idleStray > MAX_IDLE_STRAY_BYTES) this.close();
  }

  /** One received message, read only as far as it must be (see the top of this file). */
  private take(frames: Buffer[], channel: 'shell' | 'iopub'): void {
    let bytes = 0;
    for (const f of frames) bytes += f.length;
    const parts = this.verify(frames);
    const parent_header = parts && parseJson<{ msg_id?: unknown }>(parts[1]);
    const parentId = typeof parent_header?.msg_id === 'string' ? parent_header.msg_id : undefined;
    const p = parentId === undefined ? undefined : this.pending.get(parentId);
    if (!p || !parts || parentId === undefined) {
      // The status a join waits for (its parent is a kernel_info_request, never an execution).
      const join = parts && parentId !== undefined && channel === 'iopub' ? this.joins.get(parentId) : undefined;
      if (join && parts && parseJson<Partial<KernelMessage.IHeader>>(parts[0])?.msg_type === 'status') join();
      this.stray(bytes);
      return;
    }
    const header = parseJson<KernelMessage.IHeader>(parts[0]);
    const type = typeof header?.msg_type === 'string' ? header.msg_type : '';
    const read = channel === 'iopub' ? IOPUB_READ.has(type) : type === 'execute_reply';
    if (!read || channel === 'shell') {
      // Its own messages it does not read, and its reply: beyond their envelope.
      p.onStray(Math.max(0, bytes - ENVELOPE_BYTES));
      if (!read || this.pending.get(parentId) !== p) return;
    }
    const metadata = parseJson<object>(parts[2]);
    const content = parseJson<object>(parts[3]);
    if (!header || !metadata || !content) {
      if (channel === 'iopub') p.onStray(bytes); // a reply was counted above
      return;
    }
    const msg = { header, parent_header, metadata, content, channel, buffers: [] } as unknown as Message;
    if (channel === 'shell') {
      p.reply = msg as KernelMessage.IExecuteReplyMsg;
    } else {
      const echo = type === 'execute_input' && !p.echoed;
      if (echo) p.echoed = true;
      p.onIOPub(msg as KernelMessage.IIOPubMessage, echo ? 0 : bytes);
      if (this.pending.get(parentId) !== p) return;
      if (type === 'status' && (msg as KernelMessage.IStatusMsg).content.execution_state === 'idle') p.idle = true;
    }
    if (p.reply && p.idle) {
      this.pending.delete(parentId);
      p.resolve(p.reply);
    }
  }
}

/** A frame's JSON, or undefined when it is not JSON or not an object. */
function parseJson<T>(frame: Buffer): T | undefined {
  try {
    const value = JSON.parse(frame.toString('utf8')) as unknown;
    return typeof value === 'object' && value !== null ? (value as T) : undefined;
  } catch {
    return undefined;
  }
}

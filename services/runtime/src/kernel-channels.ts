import { createHmac, randomUUID, timingSafeEqual } from 'node:crypto';
import { readFile } from 'node:fs/promises';
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
/** Messages queued on the IOPub socket before the kernel's side drops them (bounds the memory a flood takes). */
const IOPUB_QUEUE = 16;
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
 * workspace's code, so nothing in it is trusted beyond the key: the transport must be `ipc`, the
 * socket prefix exactly the one the Jupyter server gives this kernel, the ports small integers.
 */
export async function readConnection(file: string, expectedIp: string): Promise<ConnectionInfo> {
  const text = await readFile(file, 'utf8');
  if (text.length > 4096) throw new Error('the kernel connection file is too large');
  const info = JSON.parse(text) as Partial<ConnectionInfo>;
  const port = (p: unknown) => typeof p === 'number' && Number.isInteger(p) && p > 0 && p < 65536;
  if (info.transport !== 'ipc') throw new Error('the kernel does not use the ipc transport');
  if (info.ip !== expectedIp) throw new Error('the kernel connection file names other sockets');
  if (info.signature_scheme !== 'hmac-sha256') throw new Error('the kernel does not sign with hmac-sha256');
  if (typeof info.key !== 'string' || info.key.length === 0 || info.key.length > 256) throw new Error('the kernel connection file has no usable key');
  if (!port(info.shell_port) || !port(info.iopub_port)) throw new Error('the kernel connection file has no usable ports');
  return info as ConnectionInfo;
}

type Message = KernelMessage.IMessage;

interface Pending {
  onIOPub: (msg: KernelMessage.IIOPubMessage) => void;
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

  private constructor(
    private readonly key: Buffer,
    private readonly shell: Dealer,
    private readonly iopub: Subscriber,
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
    const shell = new Dealer({ maxMessageSize: MAX_MESSAGE_BYTES, linger: 0 });
    const iopub = new Subscriber({ maxMessageSize: MAX_MESSAGE_BYTES, receiveHighWaterMark: IOPUB_QUEUE, linger: 0 });
    shell.connect(`ipc://${socketPrefix}-${info.shell_port}`);
    iopub.connect(`ipc://${socketPrefix}-${info.iopub_port}`);
    iopub.subscribe();
    const channels = new KernelChannels(Buffer.from(info.key, 'utf8'), shell, iopub);
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

  /** Sends an `execute_request`; IOPub messages of it go to `onIOPub` until `done`. */
  execute(content: KernelMessage.IExecuteRequestMsg['content'], onIOPub: (msg: KernelMessage.IIOPubMessage) => void): ChannelExecution {
    const header = this.header('execute_request');
    const id = header.msg_id;
    const done = new Promise<KernelMessage.IExecuteReplyMsg>((resolve, reject) => {
      this.pending.set(id, { onIOPub, idle: false, resolve, reject });
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

  /** A received multipart message, if it is well formed and signed with the kernel's key. */
  private parse(frames: Buffer[], channel: 'shell' | 'iopub'): Message | undefined {
    const at = frames.findIndex((f) => f.equals(DELIMITER));
    if (at < 0 || frames.length < at + 6) return undefined;
    const [signature, ...parts] = frames.slice(at + 1, at + 6) as [Buffer, Buffer, Buffer, Buffer, Buffer];
    const expected = this.sign(parts);
    if (signature.length !== expected.length || !timingSafeEqual(signature, expected)) return undefined;
    try {
      const [header, parent_header, metadata, content] = parts.map((p) => JSON.parse(p.toString('utf8')) as unknown);
      return { header, parent_header, metadata, content, channel, buffers: [] } as unknown as Message;
    } catch {
      return undefined;
    }
  }

  private async receive(socket: Dealer | Subscriber, channel: 'shell' | 'iopub'): Promise<void> {
    try {
      for await (const frames of socket) {
        const msg = this.parse(frames, channel);
        if (msg) this.dispatch(msg);
      }
    } catch {
      // closed
    }
  }

  private dispatch(msg: Message): void {
    const parent = (msg.parent_header as Partial<KernelMessage.IHeader>).msg_id;
    if (parent === undefined) return;
    if (msg.channel === 'iopub' && msg.header.msg_type === 'status') this.joins.get(parent)?.();
    const p = this.pending.get(parent);
    if (!p) return;
    if (msg.channel === 'shell') {
      if (msg.header.msg_type === 'execute_reply') p.reply = msg as KernelMessage.IExecuteReplyMsg;
    } else {
      p.onIOPub(msg as KernelMessage.IIOPubMessage);
      if (msg.header.msg_type === 'status' && (msg as KernelMessage.IStatusMsg).content.execution_state === 'idle') p.idle = true;
    }
    if (p.reply && p.idle) {
      this.pending.delete(parent);
      p.resolve(p.reply);
    }
  }
}

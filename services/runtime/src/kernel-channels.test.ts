import { createHmac } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { Publisher, Router } from 'zeromq';
import type { KernelMessage } from '@jupyterlab/services';
import { ENVELOPE_BYTES, KernelChannels, MAX_FRAME_BYTES, readConnection, type ConnectionInfo } from './kernel-channels.js';

const KEY = 'a-kernel-key';
const DELIMITER = '<IDS|MSG>';

/** A kernel's side of the shell and IOPub channels, scripted: what it publishes and answers per request. */
class FakeKernel {
  readonly shell = new Router({ linger: 0 });
  readonly iopub = new Publisher({ linger: 0 });
  private seq = 0;
  constructor(
    readonly prefix: string,
    private readonly onExecute: (k: FakeKernel, request: KernelMessage.IHeader) => Promise<void>,
  ) {}

  async start(): Promise<void> {
    await this.shell.bind(`ipc://${this.prefix}-1`);
    await this.iopub.bind(`ipc://${this.prefix}-2`);
    void this.serve();
  }

  private async serve(): Promise<void> {
    try {
      for await (const message of this.shell) {
        const [identity, ...frames] = message as Buffer[];
        const at = frames.findIndex((f) => f.toString() === DELIMITER);
        const header = JSON.parse(frames[at + 2]!.toString()) as KernelMessage.IHeader;
        this.identity = identity!;
        if (header.msg_type === 'kernel_info_request') {
          await this.publish('status', header, { execution_state: 'busy' });
          await this.reply(identity!, 'kernel_info_reply', header, { status: 'ok' });
          await this.publish('status', header, { execution_state: 'idle' });
        } else if (header.msg_type === 'execute_request') {
          await this.onExecute(this, header);
        }
      }
    } catch {
      // closed
    }
  }

  header(type: string, extra: object = {}): object {
    return { msg_id: `fake-${++this.seq}`, msg_type: type, username: 'k', session: 'fake', date: new Date().toISOString(), version: '5.3', ...extra };
  }

  frames(type: string, parent: object, content: object, key = KEY): Buffer[] {
    return this.signed(
      [this.header(type), parent, {}, content].map((p) => Buffer.from(JSON.stringify(p))),
      key,
    );
  }

  /** Header, parent header, metadata and content as given (JSON or not), signed as the kernel signs them. */
  signed(parts: Buffer[], key = KEY): Buffer[] {
    const hmac = createHmac('sha256', key);
    for (const p of parts) hmac.update(p);
    return [Buffer.from(DELIMITER), Buffer.from(hmac.digest('hex')), ...parts];
  }

  async publish(type: string, parent: object, content: object, key = KEY): Promise<void> {
    await this.publishFrames(this.frames(type, parent, content, key));
  }

  async publishFrames(frames: Buffer[]): Promise<void> {
    await this.iopub.send([Buffer.from('kernel.fake.iopub'), ...frames]);
  }

  /** The last requester (the ROUTER's routing id). */
  identity: Buffer = Buffer.alloc(0);
  async reply(identity: Buffer, type: string, parent: object, content: object): Promise<void> {
    await this.shell.send([identity, ...this.frames(type, parent, content)]);
  }

  close(): void {
    this.shell.close();
    this.iopub.close();
  }
}

describe('kernel channels over ZeroMQ (decision 0190)', () => {
  let dir: string;
  const open: { close(): void }[] = [];
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'kc-'));
  });
  afterEach(() => {
    for (const o of open.splice(0)) o.close();
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  const info = (prefix: string): ConnectionInfo => ({ shell_port: 1, iopub_port: 2, ip: prefix, key: KEY, transport: 'ipc', signature_scheme: 'hmac-sha256' });

  it('collects the outputs of its own request only, signed with the kernel key, and ends at the reply and idle', async () => {
    const prefix = join(dir, 'k1');
    const kernel = new FakeKernel(prefix, async (k, request) => {
      const stream = (text: string) => ({ name: 'stdout', text });
      await k.publish('status', request, { execution_state: 'busy' });
      // Forged (another key), and another request's output: neither may reach the caller.
      await k.publish('stream', request, stream('forged\n'), 'not-the-key');
      await k.publish('stream', { msg_id: 'someone-else' }, stream('other\n'));
      await k.publish('stream', request, stream('hello\n'));
      await k.reply(k.identity, 'execute_reply', request, { status: 'ok', execution_count: 7 });
      // The reply came first: the execution is not done until the idle status.
      await new Promise((r) => setTimeout(r, 100));
      await k.publish('stream', request, stream('late\n'));
      await k.publish('status', request, { execution_state: 'idle' });
    });
    await kernel.start();
    open.push(kernel);
    const channels = await KernelChannels.open(info(prefix), prefix);
    open.push(channels);
    const seen: string[] = [];
    const run = channels.execute(
      { code: 'print("hello")' },
      (msg) => {
        if (msg.header.msg_type === 'stream') seen.push((msg.content as { text: string }).text);
      },
      () => undefined,
    );
    const reply = await run.done;
    expect(reply.content).toMatchObject({ status: 'ok', execution_count: 7 });
    expect(seen).toEqual(['hello\n', 'late\n']);
  });

  it('fails what is pending when closed', async () => {
    const prefix = join(dir, 'k2');
    const kernel = new FakeKernel(prefix, () => Promise.resolve()); // never answers an execution
    await kernel.start();
    open.push(kernel);
    const channels = await KernelChannels.open(info(prefix), prefix);
    const run = channels.execute(
      { code: 'while True: pass' },
      () => undefined,
      () => undefined,
    );
    channels.close();
    await expect(run.done).rejects.toThrow(/closed/);
    expect(channels.isOpen).toBe(false);
  });

  it('gives up joining a kernel whose IOPub never answers', async () => {
    const prefix = join(dir, 'k3');
    // A shell, and an IOPub on which nothing ever shows.
    const shell = new Router({ linger: 0 });
    await shell.bind(`ipc://${prefix}-1`);
    open.push(shell);
    const iopub = new Publisher({ linger: 0 });
    await iopub.bind(`ipc://${prefix}-2`);
    open.push(iopub);
    const started = Date.now();
    await expect(KernelChannels.open(info(prefix), prefix)).rejects.toThrow(/IOPub/);
    expect(Date.now() - started).toBeLessThan(20_000);
  }, 30_000);

  // The kernel's own code holds its key (get_ipython().kernel.session): it can sign any message,
  // for no request of the runtime's, or padded, as large as ZeroMQ lets through (128 MiB), in a loop.
  const MiB = 1024 * 1024;
  const json = (v: unknown) => Buffer.from(JSON.stringify(v));
  const startKernel = async (name: string, onExecute: (k: FakeKernel, request: KernelMessage.IHeader) => Promise<void>) => {
    const prefix = join(dir, name);
    const kernel = new FakeKernel(prefix, onExecute);
    await kernel.start();
    open.push(kernel);
    const channels = await KernelChannels.open(info(prefix), prefix);
    open.push(channels);
    return { kernel, channels };
  };
  const finish = async (k: FakeKernel, request: KernelMessage.IHeader) => {
    await k.reply(k.identity, 'execute_reply', request, { status: 'ok', execution_count: 1 });
    await k.publish('status', request, { execution_state: 'idle' });
  };
  /** The longest text JSON.parse was given while `run` ran. */
  const longestParsed = async (run: () => Promise<unknown>) => {
    const parse = vi.spyOn(JSON, 'parse');
    try {
      await run();
      return Math.max(0, ...parse.mock.calls.map(([text]) => (typeof text === 'string' ? text.length : 0)));
    } finally {
      parse.mockRestore();
    }
  };
  const streams = (seen: string[]) => (msg: KernelMessage.IIOPubMessage) => {
    if (msg.header.msg_type === 'stream') seen.push((msg.content as { text: string }).text);
  };

  it('reads a signed message for no request of its own no further than its parent header: its content is never parsed, its size is counted', async () => {
    const { channels } = await startKernel('k4', async (k, request) => {
      await k.publish('status', request, { execution_state: 'busy' });
      const foreign = (content: Buffer) => k.signed([json(k.header('stream')), json({ msg_id: 'someone-else' }), json({}), content]);
      await k.publishFrames(foreign(json({ name: 'stdout', text: 'f'.repeat(8 * MiB) })));
      await k.publishFrames(foreign(Buffer.alloc(8 * MiB, 'g'))); // not even JSON
      await k.publish('stream', request, { name: 'stdout', text: 'hello\n' });
      await finish(k, request);
    });
    const seen: string[] = [];
    let stray = 0;
    const longest = await longestParsed(() => channels.execute({ code: 'flood()' }, streams(seen), (bytes) => (stray += bytes)).done);
    expect(seen).toEqual(['hello\n']);
    expect(longest).toBeLessThan(64 * 1024);
    expect(stray).toBeGreaterThanOrEqual(16 * MiB);
  });

  it('refuses unread a message whose header, parent header or metadata is beyond MAX_FRAME_BYTES, and counts its size', async () => {
    const pad = 'p'.repeat(MAX_FRAME_BYTES);
    const { channels } = await startKernel('k5', async (k, request) => {
      await k.publish('status', request, { execution_state: 'busy' });
      const stream = (text: string) => json({ name: 'stdout', text });
      await k.publishFrames(k.signed([json(k.header('stream', { pad })), json(request), json({}), stream('large header\n')]));
      await k.publishFrames(k.signed([json(k.header('stream')), json({ ...request, pad }), json({}), stream('large parent header\n')]));
      await k.publishFrames(k.signed([json(k.header('stream')), json(request), json({ pad }), stream('large metadata\n')]));
      // Just within the bound: read.
      await k.publishFrames(k.signed([json(k.header('stream')), json(request), json({ pad: pad.slice(100) }), stream('metadata within bounds\n')]));
      await finish(k, request);
    });
    const seen: string[] = [];
    let stray = 0;
    await channels.execute({ code: 'flood()' }, streams(seen), (bytes) => (stray += bytes)).done;
    expect(seen).toEqual(['metadata within bounds\n']);
    expect(stray).toBeGreaterThanOrEqual(3 * MAX_FRAME_BYTES);
  });

  it("tells its own outputs' size on the wire (the echo of its code free), and counts its own other messages beyond their envelope, unparsed", async () => {
    const junk = 'j'.repeat(4 * MiB);
    const { channels } = await startKernel('k6', async (k, request) => {
      await k.publish('status', request, { execution_state: 'busy' });
      await k.publish('execute_input', request, { code: 'c'.repeat(MiB), execution_count: 1 });
      // An output padded with what no output keeps, and a message of a type the execution does not read.
      await k.publish('stream', request, { name: 'stdout', text: 'x\n', junk });
      await k.publish('comm_msg', request, { comm_id: 'widget', data: { junk } });
      await finish(k, request);
    });
    const sizes = new Map<string, number>();
    let stray = 0;
    const longest = await longestParsed(
      () =>
        channels.execute(
          { code: 'flood()' },
          (msg, bytes) => sizes.set(msg.header.msg_type, (sizes.get(msg.header.msg_type) ?? 0) + bytes),
          (bytes) => (stray += bytes),
        ).done,
    );
    expect(sizes.get('execute_input')).toBe(0);
    expect(sizes.get('stream')).toBeGreaterThan(4 * MiB);
    expect(sizes.get('status')).toBeGreaterThan(0);
    expect(sizes.get('status')).toBeLessThan(ENVELOPE_BYTES);
    expect(sizes.has('comm_msg')).toBe(false);
    // The comm message's (never parsed: only the stream's 4 MiB were), not the reply's (within its envelope).
    expect(stray).toBeGreaterThan(4 * MiB - ENVELOPE_BYTES);
    expect(stray).toBeLessThan(4 * MiB + ENVELOPE_BYTES);
    expect(longest).toBeLessThan(5 * MiB);
  });

  it('counts a flood of signed messages for no request against the execution under way, which its caller can end at once', async () => {
    const { channels } = await startKernel('k7', async (k, request) => {
      await k.publish('status', request, { execution_state: 'busy' });
      const content = { name: 'stdout', text: 'f'.repeat(MiB) };
      for (let i = 0; i < 64; i++) await k.publish('stream', { msg_id: 'junk' }, content);
    });
    let stray = 0;
    // What the runtime does (kernels.ts): beyond the cell's output limit, the channels close.
    const run = channels.execute(
      { code: 'flood()' },
      () => undefined,
      (bytes) => {
        stray += bytes;
        if (stray > 32 * MiB) channels.close();
      },
    );
    const still = new Promise((resolve) => setTimeout(() => resolve('still waiting'), 15_000));
    await expect(Promise.race([run.done, still])).rejects.toThrow(/closed/);
    expect(stray).toBeGreaterThan(32 * MiB);
  });

  it('closes itself after 32 MiB of messages for no request while no execution is under way', async () => {
    const { kernel, channels } = await startKernel('k8', () => Promise.resolve());
    const content = { name: 'stdout', text: 'f'.repeat(MiB) };
    for (let i = 0; i < 40; i++) await kernel.publish('stream', { msg_id: 'junk' }, content);
    await vi.waitFor(() => expect(channels.isOpen).toBe(false), { timeout: 15_000, interval: 100 });
  });

  it('trusts nothing of a connection file but its key: ipc only, its own sockets, hmac-sha256, small', async () => {
    const file = join(dir, 'kernel.json');
    const expected = '/run/kernel-1-ipc';
    const good = { ...info(expected), stdin_port: 3, control_port: 4, hb_port: 5, kernel_name: '' };
    const check = async (over: object) => {
      writeFileSync(file, JSON.stringify({ ...good, ...over }));
      return readConnection(file, expected);
    };
    await expect(check({})).resolves.toMatchObject({ key: KEY, shell_port: 1 });
    await expect(check({ transport: 'tcp', ip: '127.0.0.1' })).rejects.toThrow(/ipc/);
    // The workspace's code rewrote it to point the runtime elsewhere.
    await expect(check({ ip: '/run/../../var/run/postgresql/.s.PGSQL' })).rejects.toThrow(/other sockets/);
    await expect(check({ ip: '/run/kernel-2-ipc' })).rejects.toThrow(/other sockets/);
    await expect(check({ signature_scheme: 'hmac-md5' })).rejects.toThrow(/hmac-sha256/);
    await expect(check({ key: '' })).rejects.toThrow(/key/);
    await expect(check({ shell_port: '1; rm -rf /' })).rejects.toThrow(/ports/);
    await expect(check({ iopub_port: 70000 })).rejects.toThrow(/ports/);
    await expect(check({ padding: 'x'.repeat(5000) })).rejects.toThrow(/larger than 4096 bytes/);
    // Nothing of what it holds is said when it is not JSON.
    writeFileSync(file, 'root:*:20000:0:99999:7:::');
    await expect(readConnection(file, expected)).rejects.toThrow(/^the kernel connection file is not JSON$/);
  });
});

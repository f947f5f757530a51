import { createHmac } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Publisher, Router } from 'zeromq';
import type { KernelMessage } from '@jupyterlab/services';
import { KernelChannels, readConnection, type ConnectionInfo } from './kernel-channels.js';

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

  frames(type: string, parent: object, content: object, key = KEY): Buffer[] {
    const header = { msg_id: `fake-${++this.seq}`, msg_type: type, username: 'k', session: 'fake', date: new Date().toISOString(), version: '5.3' };
    const parts = [header, parent, {}, content].map((p) => Buffer.from(JSON.stringify(p)));
    const hmac = createHmac('sha256', key);
    for (const p of parts) hmac.update(p);
    return [Buffer.from(DELIMITER), Buffer.from(hmac.digest('hex')), ...parts];
  }

  async publish(type: string, parent: object, content: object, key = KEY): Promise<void> {
    await this.iopub.send([Buffer.from(`kernel.fake.${type}`), ...this.frames(type, parent, content, key)]);
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
    const run = channels.execute({ code: 'print("hello")' }, (msg) => {
      if (msg.header.msg_type === 'stream') seen.push((msg.content as { text: string }).text);
    });
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
    const run = channels.execute({ code: 'while True: pass' }, () => undefined);
    channels.close();
    await expect(run.done).rejects.toThrow(/closed/);
    expect(channels.isOpen).toBe(false);
  });

  it('gives up joining a kernel whose IOPub never answers', async () => {
    const prefix = join(dir, 'k3');
    // Only a shell: nothing ever shows on IOPub.
    const shell = new Router({ linger: 0 });
    await shell.bind(`ipc://${prefix}-1`);
    open.push(shell);
    const started = Date.now();
    await expect(KernelChannels.open(info(prefix), prefix)).rejects.toThrow(/IOPub/);
    expect(Date.now() - started).toBeLessThan(20_000);
  }, 30_000);

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
    await expect(check({ padding: 'x'.repeat(5000) })).rejects.toThrow(/too large/);
  });
});

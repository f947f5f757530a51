import { createServer, request, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pipeline } from 'node:stream/promises';
import { PassThrough, Writable, type Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { lastChunkWhen, requestBody } from './body.js';

describe('requestBody', () => {
  it('a client gone before the consumer began: no unheard error, and the consumer that begins then fails at once', async () => {
    const uncaught: unknown[] = [];
    const onUncaught = (err: unknown) => uncaught.push(err);
    process.on('uncaughtException', onUncaught);
    let arrived!: (req: IncomingMessage) => void;
    const got = new Promise<IncomingMessage>((r) => (arrived = r));
    const server = createServer((req) => arrived(req));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const client = request({ host: '127.0.0.1', port: (server.address() as AddressInfo).port, method: 'PUT', headers: { 'content-length': 1000 } });
      client.on('error', () => undefined);
      client.write('only a part');
      const body = requestBody(await got);
      client.destroy();
      await new Promise((r) => setTimeout(r, 200));
      expect(body.destroyed).toBe(true);
      expect(uncaught).toEqual([]);
      // (A proxy's queue, or a lock, held the body meanwhile.) Read now: it fails, it does not wait.
      await expect(pipeline(body, new Writable({ write: (_c, _e, done) => done() }))).rejects.toThrow(/before the body was complete/);
      const chunks: Buffer[] = [];
      await expect(
        (async () => {
          for await (const c of body) chunks.push(c as Buffer);
        })(),
      ).rejects.toThrow(/before the body was complete/);
    } finally {
      process.off('uncaughtException', onUncaught);
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });
});

describe('lastChunkWhen', () => {
  const read = async (stream: Readable) => {
    const chunks: Buffer[] = [];
    for await (const c of stream) chunks.push(c as Buffer);
    return Buffer.concat(chunks).toString();
  };

  it('passes the whole body once the check holds, and holds its last chunk until then', async () => {
    const source = new PassThrough();
    let asked = false;
    let release!: (ok: boolean) => void;
    const out = lastChunkWhen(source, () => {
      asked = true;
      return new Promise<boolean>((r) => (release = r));
    });
    const seen: string[] = [];
    out.on('data', (c: Buffer) => seen.push(c.toString()));
    source.write('one,');
    source.write('two,');
    source.end('last');
    await new Promise((r) => setTimeout(r, 20));
    expect(asked).toBe(true);
    expect(seen.join('')).toBe('one,two,');
    release(true);
    await new Promise((r) => out.once('end', r));
    expect(seen.join('')).toBe('one,two,last');
  });

  it('fails without the last chunk when the check refuses', async () => {
    const source = new PassThrough();
    const out = lastChunkWhen(
      source,
      () => Promise.resolve(false),
      () => new Error('refused here'),
    );
    source.write('one,');
    source.end('last');
    await expect(read(out)).rejects.toThrow('refused here');
  });
});

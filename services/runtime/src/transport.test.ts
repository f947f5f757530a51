import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocketServer } from 'ws';
import { tcpSettings, withMessageGate } from './transport.js';

/** Decision 0247: a websocket of the gated settings drops the messages its gate refuses before anyone reads them. */
describe('withMessageGate', () => {
  let server: WebSocketServer;
  let url: string;
  beforeAll(async () => {
    server = new WebSocketServer({ host: '127.0.0.1', port: 0 });
    await new Promise<void>((resolve) => server.once('listening', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    // Each client gets: a small text, a large text, a large binary message, then "end".
    server.on('connection', (socket) => {
      socket.send('small');
      socket.send('x'.repeat(100_000));
      socket.send(Buffer.alloc(200_000, 1));
      socket.send('end');
    });
  });
  afterAll(async () => {
    await new Promise((resolve) => server.close(resolve));
  });

  const received = async (open: boolean): Promise<{ seen: number[]; asked: number[] }> => {
    const asked: number[] = [];
    const settings = withMessageGate(tcpSettings(url, 'token'), (bytes) => {
      asked.push(bytes);
      return bytes <= 1024 || open;
    });
    const socket = new settings.WebSocket(`${url.replace('http', 'ws')}/channels`);
    socket.binaryType = 'arraybuffer';
    const seen: number[] = [];
    await new Promise<void>((resolve) => {
      socket.onmessage = (evt: MessageEvent<string | ArrayBuffer>) => {
        seen.push(typeof evt.data === 'string' ? evt.data.length : evt.data.byteLength);
        if (evt.data === 'end') resolve();
      };
    });
    socket.close();
    return { seen, asked };
  };

  it('passes what the gate admits, drops the rest unread, and asks with each message’s size', async () => {
    expect(await received(false)).toEqual({ seen: [5, 3], asked: [5, 100_000, 200_000, 3] });
    expect((await received(true)).seen).toEqual([5, 100_000, 200_000, 3]);
  });
});

import { mkdtempSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { freePort, pickRange } from './ports.js';

const listening: Server[] = [];
afterEach(async () => {
  await Promise.all(listening.splice(0).map((s) => new Promise((r) => s.close(r))));
});

/** Listens on `port` of 127.0.0.1 (rejects with the error, EADDRINUSE included). */
function listen(port: number): Promise<Server> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(port, '127.0.0.1', () => {
      listening.push(s);
      resolve(s);
    });
  });
}

function rangeFile(text: string): string {
  const file = join(mkdtempSync(join(tmpdir(), 'ports-')), 'ip_local_port_range');
  writeFileSync(file, text);
  return file;
}

describe('freePort (decision 0196)', () => {
  it('picks below the ephemeral range, where no outgoing connection takes a port, and the port can be listened on', async () => {
    const range = pickRange();
    expect(range).toBeDefined();
    const [bottom, top] = range!;
    const port = await freePort();
    expect(port).toBeGreaterThanOrEqual(bottom);
    expect(port).toBeLessThan(top);
    await listen(port);
  });

  it('never hands out the same port twice', async () => {
    const ports = [];
    for (let i = 0; i < 200; i++) ports.push(await freePort());
    expect(new Set(ports).size).toBe(200);
    // Each of them could be listened on, as a component would.
    await Promise.all(ports.slice(0, 50).map((p) => listen(p)));
    // A range of one port already given: the kernel's pick instead (in its own range, above).
    const [, top] = pickRange()!;
    const last = ports[199]!;
    expect(await freePort('127.0.0.1', [last, last + 1])).toBeGreaterThanOrEqual(top);
  });

  it('skips a port someone listens on (the kernel picks when nothing in the range is free)', async () => {
    const busy = ((await listen(0)).address() as { port: number }).port;
    const got = await freePort('127.0.0.1', [busy, busy + 1]);
    expect(got).not.toBe(busy);
    await listen(got);
  });

  it('reads the range the kernel is set to, and gives up on a range that leaves too few ports', () => {
    expect(pickRange(rangeFile('32768\t60999\n'))).toEqual([12768, 32768]);
    expect(pickRange(rangeFile('49152 65535\n'))).toEqual([29152, 49152]);
    expect(pickRange(rangeFile('15000 65535\n'))).toEqual([10000, 15000]);
    expect(pickRange(rangeFile('11000 65535\n'))).toBeUndefined();
    expect(pickRange('/nonexistent/ip_local_port_range')).toEqual([12768, 32768]);
  });
});

import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';

/**
 * A free TCP port on `host` for a test or a benchmark to give a component it starts (decision
 * 0196). Not the kernel's `listen(0)`: that port comes from the ephemeral range, the range the
 * kernel also takes the local port of every outgoing connection from, so between the pick and
 * the component's own `listen` (seconds later, after a database or a Python server started) any
 * connection on the machine could take it, and the component then failed with EADDRINUSE (CI
 * lost a run to this once). A port below that range is never given to a connection: it is
 * taken only by whoever binds it by number. The port was free when checked, and no port is
 * handed out twice by one process. `range` (`[bottom, top)`, default `pickRange()`) is for tests.
 */
export async function freePort(host = '127.0.0.1', range = pickRange()): Promise<number> {
  if (range !== undefined) {
    const [bottom, top] = range;
    for (let attempt = 0; attempt < 64; attempt++) {
      const port = bottom + Math.floor(Math.random() * (top - bottom));
      if (handedOut.has(port)) continue;
      if ((await bindable(port, host)) === port) return remember(port);
    }
  }
  // (Nothing free in the range after many tries, or no such range: the kernel's pick.)
  return remember(await bindable(0, host));
}

const handedOut = new Set<number>();
const remember = (port: number): number => {
  handedOut.add(port);
  return port;
};

/**
 * The ports tried, `[bottom, top)`: up to 20 000 below the kernel's ephemeral range
 * (`ip_local_port_range`), none under 10 000 (the ports daemons are usually configured on).
 * Undefined when that leaves fewer than 2048.
 */
export function pickRange(rangeFile = '/proc/sys/net/ipv4/ip_local_port_range'): [bottom: number, top: number] | undefined {
  let low = 32768;
  try {
    const first = Number(readFileSync(rangeFile, 'utf8').trim().split(/\s+/)[0]);
    if (Number.isInteger(first)) low = first;
  } catch {
    // not Linux: the usual range
  }
  const bottom = Math.max(10_000, low - 20_000);
  return low - bottom >= 2048 ? [bottom, low] : undefined;
}

/** Binds `port` (0: the kernel picks) on `host` and lets it go: the port bound, or -1 when it was taken. */
function bindable(port: number, host: string): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer();
    s.once('error', () => resolve(-1));
    s.listen(port, host, () => {
      const bound = (s.address() as { port: number }).port;
      s.close(() => resolve(bound));
    });
  });
}

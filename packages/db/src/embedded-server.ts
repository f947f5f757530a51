import { join } from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import { PGLiteSocketServer } from '@electric-sql/pglite-socket';
import { lockEmbeddedDatabase } from './open.js';

export interface EmbeddedDatabaseServer {
  /** postgres:// URL the other components connect to. */
  url: string;
  stop(): Promise<void>;
}

/**
 * Serves the embedded database (PGlite in `${dataDir}/pgdata`) over the PostgreSQL wire
 * protocol on a loopback port, so that every component of a single-machine start shares
 * one database through the same `pg` driver they use against a real server.
 * pglite-socket multiplexes the connections onto PGlite's one session and keeps a
 * transaction's statements together.
 */
export async function startEmbeddedDatabaseServer(dataDir: string, port = 0): Promise<EmbeddedDatabaseServer> {
  const unlock = lockEmbeddedDatabase(dataDir);
  const db = new PGlite(join(dataDir, 'pgdata'));
  await db.waitReady;
  const chosenPort = port === 0 ? await freePort() : port;
  const server = new PGLiteSocketServer({ db, host: '127.0.0.1', port: chosenPort, maxConnections: 100 });
  await server.start();
  return {
    url: `postgres://postgres@127.0.0.1:${chosenPort}/postgres`,
    async stop() {
      await server.stop();
      await db.close();
      unlock();
    },
  };
}

async function freePort(): Promise<number> {
  const { createServer } = await import('node:net');
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const address = srv.address();
      srv.close(() => resolve(typeof address === 'object' && address ? address.port : 0));
    });
  });
}

import { closeSync, mkdirSync, openSync, readFileSync, rmSync, writeSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import type { Config } from '@codeagent/config';

/** A reason not to start, said in one line (no stack trace). */
export class StartError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'StartError';
  }
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * One `codeagent start` per data directory: a lock file with the supervisor's pid, created
 * exclusively; a lock whose process is gone (a supervisor killed with SIGKILL) is taken over.
 * Returns the release function.
 */
export function acquireDataDirLock(dataDir: string): () => void {
  try {
    mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  } catch (err) {
    throw new StartError(`cannot create DATA_DIR ${dataDir}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}; choose a writable directory`);
  }
  const file = join(dataDir, 'codeagent.pid');
  for (let attempt = 0; attempt < 2; attempt++) {
    let fd: number;
    try {
      fd = openSync(file, 'wx', 0o600);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code !== 'EEXIST') {
        const why = code === 'ENOSPC' ? 'the disk is full' : code === 'EACCES' || code === 'EROFS' || code === 'EPERM' ? 'it is not writable' : String(code);
        throw new StartError(`cannot use DATA_DIR ${dataDir}: ${why}; free space or choose another DATA_DIR`);
      }
      const owner = Number(readFileSync(file, 'utf8').trim());
      if (Number.isInteger(owner) && owner > 0 && owner !== process.pid && pidAlive(owner)) {
        throw new StartError(
          `DATA_DIR ${dataDir} is in use by process ${owner} (another \`codeagent start\`); stop it first, use another DATA_DIR, ` +
            'or run several components against one PostgreSQL server with DATABASE_URL',
        );
      }
      rmSync(file, { force: true });
      continue;
    }
    writeSync(fd, `${process.pid}\n`);
    closeSync(fd);
    return () => rmSync(file, { force: true });
  }
  throw new StartError(`cannot take the lock ${file}; remove it if no codeagent runs on this DATA_DIR`);
}

function portFree(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.once('error', () => resolve(false));
    srv.listen({ host, port, exclusive: true }, () => srv.close(() => resolve(true)));
  });
}

/**
 * Every port the platform will listen on must be free before anything starts: otherwise a
 * health check could reach another program (or another codeagent) and report it as ours.
 */
export async function checkPortsFree(config: Config): Promise<void> {
  const ports: [string, string, number][] = [
    ['PORT', config.host, config.port],
    ['BACKEND_PORT', config.componentHost, config.backendPort],
    ['RUNTIME_PORT', config.componentHost, config.runtimePort],
    ['CLUSTER_ADMIN_PORT', config.componentHost, config.clusterAdminPort],
    ['BRIDGE_PORT', config.componentHost, config.bridgePort],
  ];
  for (const [name, host, port] of ports) {
    if (port === 0) continue;
    if (!(await portFree(host, port))) {
      throw new StartError(
        `port ${port} on ${host} (${name}) is already in use, perhaps by another codeagent; stop that program or set ${name} to a free port`,
      );
    }
  }
}

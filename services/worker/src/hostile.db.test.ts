import { createHash, randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdtempSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import pino from 'pino';
import { INTERNAL_TOKEN, TEST_JWT_SECRET, bearer, startTestBackend, type RunDto, type TestBackend, type WorkspaceDto } from '@codeagent/backend/testing';
import { buildRuntimeApp, workspaceMountsFor, type Kernels } from '@codeagent/runtime';
import type { Config } from '@codeagent/config';
import { startTestKernels } from '@codeagent/runtime/testing';
import { databaseUidAllocator } from '@codeagent/sandbox';
import { LocalObjectStore } from '@codeagent/storage';
import { WorkspaceFiles, type ObjectDto } from '@codeagent/files';
import type { ListPage } from '@codeagent/service-kit';
// The ports the probes aim at lie below the ephemeral range (decision 0196): a listener the
// sandbox's own kernels open in its network namespace (an ephemeral port) never shares their number.
import { freePort } from '@codeagent/service-kit/http';
import { ScheduleWorker } from './worker.js';
import { platformRunIO } from './server.js';
import { runtimeClient } from '@codeagent/clients';
import { MOUNT_PROBES, PROBES, probeSource, type Probe, type ProbeParams } from './hostile-corpus.js';

const log = pino({ level: 'silent' });
const CHECKOUT = resolve(fileURLToPath(new URL('../../..', import.meta.url)));
const notebookOf = (source: string) =>
  JSON.stringify({
    nbformat: 4,
    nbformat_minor: 5,
    metadata: { kernelspec: { name: 'python3', display_name: 'Python 3' } },
    cells: [{ cell_type: 'code', source, metadata: {}, outputs: [], execution_count: null }],
  });

interface Output {
  output_type: string;
  text?: string;
  ename?: string;
  evalue?: string;
  data?: Record<string, unknown>;
}
const textOf = (outputs: Output[]) => outputs.map((o) => o.text ?? (o.ename ? `${o.ename}: ${o.evalue}` : '')).join('');

const fuse = existsSync('/dev/fuse') && existsSync('/usr/bin/rclone') && existsSync('/usr/bin/fusermount3') && process.getuid?.() === 0;
/** On mounted servers (decision 0141): the whole corpus, and the probes of what the mount adds. */
const mountedProbes = [...PROBES, ...MOUNT_PROBES];
const MiB = 1024 * 1024;

/** The loopback ports of the rclone remote controls running now (from their command lines). */
function rclonePorts(): number[] {
  const ports: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const args = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0');
      const addr = args[0]?.endsWith('rclone') ? args[args.indexOf('--rc-addr') + 1] : undefined;
      if (addr && args.includes('--rc-addr')) ports.push(Number(addr.split(':').at(-1)));
    } catch {
      // gone
    }
  }
  return ports;
}

/**
 * The hostile-notebook corpus (hostile-corpus.ts), every probe run twice on real components:
 * through the runtime's `execute` action and as a notebook run (runs API → worker → runtime).
 * A DATA_DIR with world-readable secrets and local storage sits on the host; the platform's
 * ports listen on loopback; sentinels on IPv4 and IPv6 loopback count any connection. Every
 * probe must be blocked (or, for the memory hog and kill -1, end its own kernel with a clear
 * message), no secret may appear in any output, and the platform must stay healthy.
 */
// The database is not what this corpus tests, and it takes minutes: it runs once, on the
// embedded database half (always present), not again on PostgreSQL. Twice there: on servers with
// a private /workspace, and on servers with the workspace's files mounted (rclone, decision 0141).
function corpus(mounted: boolean) {
  const probes = mounted ? mountedProbes : PROBES;
  describe.runIf(process.env.CODEAGENT_TEST_DB === 'embedded' && (!mounted || fuse))(
    mounted
      ? 'hostile notebooks cannot leave the sandbox, on mounted workspace files (embedded-database half only)'
      : 'hostile notebooks cannot leave the sandbox (runs on the embedded-database half only: it takes minutes)',
    () => {
      let b: TestBackend;
      let jupyter: Kernels;
      let runtime: FastifyInstance;
      let worker: ScheduleWorker;
      let dataDir: string;
      let markers: string[];
      let secretsHash: string;
      let params: ProbeParams;
      const sentinels: Server[] = [];
      let sentinelHits = 0;
      const ws: Record<'a' | 'b', string> = { a: '', b: '' };
      /** Workspaces of the probes that take down or fill their own sandbox. */
      const own = new Map<string, string>();
      const workspaceOf = (probe: Probe) => (probe.ownWorkspace ? own.get(probe.name)! : ws.a);
      let backendUrl = '';
      let runtimeUrl = '';

      const act = async (body: Record<string, unknown>) => {
        const res = await fetch(`${runtimeUrl}/api/v1/jupyter`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-internal-service-token': INTERNAL_TOKEN },
          body: JSON.stringify(body),
        });
        return { status: res.status, body: (await res.json()) as Record<string, unknown> };
      };
      const startKernel = async (workspace: string) => {
        const res = await act({ action: 'start_kernel', workspace_id: workspace });
        expect(res.status, JSON.stringify(res.body)).toBe(200);
        return res.body.kernel_id as string;
      };
      const api = (workspace: string, url: string, method = 'GET', payload?: object) =>
        b.app.inject({
          method: method as 'GET',
          url: `/api/v1/workspaces/${workspace}/${url}`,
          headers: bearer(b.adminToken),
          ...(payload ? { payload } : {}),
        });
      const upload = (workspace: string, path: string, body: string) =>
        b.app.inject({
          method: 'PUT',
          url: `/api/v1/data-resources/${workspace}/objects/${path}`,
          headers: { ...bearer(b.adminToken), 'content-type': 'application/octet-stream' },
          payload: body,
        });

      beforeAll(async () => {
        dataDir = mkdtempSync(join(tmpdir(), 'codeagent-hostile-'));
        // Readable by anyone on the host: only the sandbox's namespaces keep it out, not permissions.
        chmodSync(dataDir, 0o755);
        const secrets = {
          JWT_SECRET: `jwt-marker-${randomBytes(12).toString('hex')}`,
          INTERNAL_SERVICE_TOKEN: `internal-marker-${randomBytes(12).toString('hex')}`,
          ADMIN_TOKENS: `admin-marker-${randomBytes(12).toString('hex')}`,
          BOOTSTRAP_ADMIN_PASSWORD: `password-marker-${randomBytes(12).toString('hex')}`,
        };
        writeFileSync(join(dataDir, 'secrets.json'), JSON.stringify(secrets), { mode: 0o644 });
        secretsHash = createHash('sha256')
          .update(readFileSync(join(dataDir, 'secrets.json')))
          .digest('hex');
        const store = new LocalObjectStore(join(dataDir, 'storage'));
        b = await startTestBackend({ store });
        markers = [...Object.values(secrets), INTERNAL_TOKEN, TEST_JWT_SECRET, b.adminToken];
        backendUrl = (await b.app.listen({ host: '127.0.0.1', port: await freePort() })).replace(/\/$/, '');
        const diskBytes = 64 * MiB;
        // The runtime's own mounts, from its settings (as `codeagent start` makes them): below DATA_DIR.
        const mounts = mounted
          ? workspaceMountsFor({ sandbox: { enabled: true, diskBytes }, backendUrl, internalServiceToken: INTERNAL_TOKEN, dataDir } as unknown as Config, log)
          : undefined;
        if (mounted && !mounts) throw new Error('the runtime would not mount workspaces here');
        jupyter = await startTestKernels({
          ...(mounts ? { mounts } : {}),
          log,
          uids: databaseUidAllocator(b.t.database.db, 1_900_000_000),
          sandbox: {
            kernelMemoryBytes: 256 * 1024 * 1024,
            kernelPidsMax: 64,
            pidsMax: 384,
            diskBytes,
            tmpBytes: 32 * MiB,
            maxServers: 4 + probes.filter((p) => p.ownWorkspace).length,
          },
        });
        runtime = await buildRuntimeApp({ kernels: jupyter.kernels, internalServiceToken: INTERNAL_TOKEN });
        runtimeUrl = (await runtime.listen({ host: '127.0.0.1', port: await freePort() })).replace(/\/$/, '');
        for (const host of ['127.0.0.1', '::1']) {
          const s = createServer((c) => {
            sentinelHits++;
            c.destroy();
          });
          const port = await freePort(host);
          await new Promise<void>((r) => s.listen(port, host, r));
          sentinels.push(s);
        }

        const newWorkspace = async (name: string) =>
          (await b.app.inject({ method: 'POST', url: '/api/v1/platform/workspaces', headers: bearer(b.adminToken), payload: { name } })).json<WorkspaceDto>()
            .id;
        ws.a = await newWorkspace('hostile-a');
        ws.b = await newWorkspace('hostile-b');
        for (const probe of probes.filter((p) => p.ownWorkspace)) own.set(probe.name, await newWorkspace(`hostile-${probe.name}`));
        // Workspace B holds a secret file (in storage, and in its running sandbox) and a live kernel.
        const stored = await upload(ws.b, 'secret-b.txt', 'secret of workspace B');
        expect(stored.statusCode).toBe(201);
        const otherKernel = await startKernel(ws.b);
        // Mounted, the stored file is B's /workspace/secret-b.txt already (writing it would make a new version, moving the blob).
        const touch = mounted
          ? 'assert open("/workspace/secret-b.txt").read() == "secret of workspace B"'
          : 'open("/workspace/secret-b.txt", "w").write("secret of workspace B")';
        const touched = await act({ action: 'execute', kernel_id: otherKernel, code: touch });
        expect(touched.body.status, JSON.stringify(touched.body)).toBe('ok');
        const pool = jupyter.pool.running().find((s) => s.workspaceId === ws.b) as unknown as { sandbox: { hostPath(p: string): string } };

        params = {
          data_dir: dataDir,
          checkout: CHECKOUT,
          other_blob: join(dataDir, 'storage', 'workspace', ws.b, stored.json<ObjectDto>().version_id),
          other_jupyter_socket: pool.sandbox.hostPath('/run/jupyter.sock'),
          other_kernel: otherKernel,
          jupyter_base_paths: [`/jupyter/${ws.a}/`, `/jupyter/${ws.b}/`],
          ports: [Number(new URL(backendUrl).port), Number(new URL(runtimeUrl).port), ...sentinels.map((s) => (s.address() as { port: number }).port)],
          platform_pids: [process.pid, process.ppid],
          nonce: `codeagent-escape-${randomBytes(6).toString('hex')}`,
        };
        if (mounted) {
          // Workspace A's server (and mount) runs too: both remote controls are probed.
          await act({ action: 'shutdown', kernel_id: await startKernel(ws.a) });
          params.rc_ports = rclonePorts();
          expect(params.rc_ports.length).toBeGreaterThanOrEqual(2);
          // What each fill may take before it is refused; on the mount rclone says EIO (decision 0141).
          params.fill_limits_mib = { '/workspace': diskBytes / MiB, '/tmp': 32, '/dev/shm': 64 };
        }
        expect(existsSync(params.other_blob)).toBe(true);

        worker = new ScheduleWorker({
          db: b.t.database.db,
          io: platformRunIO(new WorkspaceFiles(b.t.database.db, store), backendUrl, INTERNAL_TOKEN),
          runtime: runtimeClient(runtimeUrl, INTERNAL_TOKEN),
          log,
          pollMs: 200,
          concurrency: 3,
          runTimeoutSeconds: 120,
          filesMaxBytes: 16 * 1024 * 1024,
        });
      }, 120_000);

      afterAll(async () => {
        await worker?.stop(5000);
        await runtime?.close();
        await jupyter?.stop();
        for (const s of sentinels) s.close();
        await b?.close();
      });

      const noSecrets = (text: string, where: string) => {
        for (const m of markers) expect(text.includes(m), `a platform secret appeared in ${where}`).toBe(false);
      };

      function judge(probe: Probe, text: string, where: string) {
        // HOSTILE_PRINT=1 prints what each probe said (to read a run by eye).
        if (process.env.HOSTILE_PRINT) console.info(`== ${where}\n${text}`);
        noSecrets(text, where);
        expect(text, `${probe.name} (${where})`).not.toMatch(/^LEAK/m);
        if (probe.expect === 'blocked') expect(text, `${probe.name} (${where})`).toMatch(/^BLOCKED/m);
      }

      it.runIf(!mounted)(`has at least 25 probes (${PROBES.length})`, () => {
        expect(PROBES.length).toBeGreaterThanOrEqual(25);
        expect(new Set(PROBES.map((p) => p.name)).size).toBe(PROBES.length);
      });

      it("blocks every probe run through the runtime's execute action", async () => {
        let shared = await startKernel(ws.a);
        const failures: string[] = [];
        for (const probe of probes) {
          const workspace = workspaceOf(probe);
          const kernel = probe.ownKernel || probe.ownWorkspace ? await startKernel(workspace) : shared;
          const res = await act({ action: 'execute', kernel_id: kernel, code: probeSource(probe, params), timeout_seconds: 90 });
          try {
            expect(res.status, JSON.stringify(res.body).slice(0, 500)).toBe(200);
            const outputs = res.body.outputs as Output[];
            const text = textOf(outputs);
            judge(probe, text, `execute ${probe.name}`);
            if (probe.expect === 'blocked') {
              expect(res.body.status, `${probe.name}: ${text.slice(0, 800)}`).toBe('ok');
            } else if (probe.expect === 'stopped') {
              expect(res.body.status).toBe('error');
              expect(res.body.kernel_died).toBeUndefined();
              expect(text).toMatch(probe.message!);
            } else {
              expect(res.body).toMatchObject({ status: 'error', kernel_died: true });
              const died = outputs.find((o) => o.ename === 'DeadKernelError');
              expect(died?.evalue, probe.name).toMatch(probe.message!);
            }
          } catch (err) {
            failures.push(`${probe.name}: ${(err as Error).message.split('\n')[0]}`);
          }
          if (kernel !== shared) await act({ action: 'shutdown', kernel_id: kernel });
          else if (res.body.kernel_died) shared = await startKernel(ws.a);
        }
        expect(failures).toEqual([]);
      }, 600_000);

      it('blocks every probe run as a notebook run (runs API → worker → runtime), each run ending with a clear status', async () => {
        const runs = new Map<string, { probe: Probe; workspace: string }>();
        for (const probe of probes) {
          const workspace = workspaceOf(probe);
          const path = `probes/${probe.name}.ipynb`;
          expect((await upload(workspace, path, notebookOf(probeSource(probe, params)))).statusCode).toBe(201);
        }
        worker.start();
        for (const probe of probes) {
          const workspace = workspaceOf(probe);
          const queued = await api(workspace, 'runs', 'POST', { notebook_path: `probes/${probe.name}.ipynb` });
          expect(queued.statusCode).toBe(202);
          runs.set(queued.json<RunDto>().id, { probe, workspace });
        }
        const deadline = Date.now() + 540_000;
        const finished = new Map<string, { status: string; error: string | null; output_path: string | null }>();
        while (finished.size < runs.size && Date.now() < deadline) {
          for (const [id, { workspace }] of runs) {
            if (finished.has(id)) continue;
            const run = (await api(workspace, `runs/${id}`)).json<RunDto>();
            if (!['queued', 'running'].includes(run.status)) finished.set(id, run);
          }
          await new Promise((r) => setTimeout(r, 500));
        }
        expect(finished.size, 'every run finished').toBe(runs.size);

        const failures: string[] = [];
        for (const [id, { probe, workspace }] of runs) {
          const run = finished.get(id)!;
          try {
            const logText = (await api(workspace, `runs/${id}/log`)).body;
            noSecrets(logText, `run log of ${probe.name}`);
            if (probe.expect === 'blocked') {
              expect(run.status, `${probe.name}: ${run.error}`).toBe('succeeded');
            } else {
              expect(run.status).toBe('failed');
              if (probe.expect === 'dies') expect(run.error).toMatch(/^DeadKernelError: /);
              expect(run.error).toMatch(probe.message!);
            }
            expect(run.output_path).toBe(`probes/${probe.name}.runs/${id}.ipynb`);
            const executed = await b.app.inject({
              method: 'GET',
              url: `/api/v1/data-resources/${workspace}/objects/${run.output_path}`,
              headers: bearer(b.adminToken),
            });
            expect(executed.statusCode).toBe(200);
            const text = textOf((JSON.parse(executed.body) as { cells: { outputs: Output[] }[] }).cells[0]!.outputs);
            judge(probe, text, `run ${probe.name}`);
          } catch (err) {
            failures.push(`${probe.name}: ${(err as Error).message.split('\n')[0]}`);
          }
        }
        expect(failures).toEqual([]);
      }, 600_000);

      it('leaves the host untouched and the platform healthy', async () => {
        expect(
          createHash('sha256')
            .update(readFileSync(join(dataDir, 'secrets.json')))
            .digest('hex'),
        ).toBe(secretsHash);
        for (const p of [join(dataDir, 'pwned'), join(CHECKOUT, 'pwned'), join('/tmp', params.nonce), '/pwned', '/etc/pwned', '/usr/pwned']) {
          expect(existsSync(p), p).toBe(false);
        }
        expect(sentinelHits).toBe(0);
        expect((await fetch(`${backendUrl}/api/v1/health`)).status).toBe(200);
        expect((await act({ action: 'list_kernels' })).status).toBe(200);
        const kernel = await startKernel(ws.a);
        const res = await act({ action: 'execute', kernel_id: kernel, code: 'print(6 * 7)' });
        expect(res.body).toMatchObject({ status: 'ok', outputs: [{ output_type: 'stream', text: '42\n' }] });
        await act({ action: 'shutdown', kernel_id: kernel });
        // no file a probe wrote came back into the workspace, other than the executed notebooks
        const objects = (await b.app.inject({ method: 'GET', url: `/api/v1/data-resources/${ws.a}/objects?limit=1000`, headers: bearer(b.adminToken) })).json<
          ListPage<ObjectDto>
        >().items;
        expect(objects.filter((o) => !o.path.startsWith('probes/'))).toEqual([]);
        // Names written through the mount are stored as plain names, never resolved ('..' segments).
        expect(objects.filter((o) => o.path.split('/').includes('..'))).toEqual([]);
        if (mounted) {
          // mount-special-files' three traversal names: each one object in its own folder.
          const special = objects.filter((o) => o.path.startsWith('probes/special/')).map((o) => o.path);
          if (process.env.HOSTILE_PRINT) console.info(special);
          expect(special.filter((p) => p.includes('pwned'))).toHaveLength(3);
          expect(special.every((p) => p.split('/').length === 3)).toBe(true);
        }
        // Workspace B holds its one file, whatever A's probes wrote.
        const others = (await b.app.inject({ method: 'GET', url: `/api/v1/data-resources/${ws.b}/objects?limit=1000`, headers: bearer(b.adminToken) })).json<
          ListPage<ObjectDto>
        >().items;
        expect(others.map((o) => o.path)).toEqual(['secret-b.txt']);
      }, 120_000);
    },
  );
}

corpus(false);
corpus(true);

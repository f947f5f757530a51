import { spawn } from 'node:child_process';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pino from 'pino';
import { mountTokenKey } from '@codeagent/auth';
import { INTERNAL_TOKEN, bearer, startTestBackend, type TestBackend } from '@codeagent/backend/testing';
import { WorkspaceMounts, isMounted, labProxy, type Kernels } from '@codeagent/runtime';
import type { FastifyInstance } from 'fastify';
import { startTestS3Store, type TestS3Store } from '@codeagent/storage/testing';
import type { ScheduleWorker } from './worker.js';
import { startMountedRig } from './testing.js';

const logLines: string[] = [];
const log = pino({ level: 'info' }, { write: (line: string) => void logLines.push(line) });
const notebook = (cells: string[]) =>
  JSON.stringify({
    nbformat: 4,
    nbformat_minor: 5,
    metadata: { kernelspec: { name: 'python3', display_name: 'Python 3' } },
    cells: cells.map((source) => ({ cell_type: 'code', source, metadata: {}, outputs: [], execution_count: null })),
  });

const fuse = existsSync('/dev/fuse') && existsSync('/usr/bin/rclone');
if (!fuse) console.warn('mount-run: /dev/fuse or rclone is missing on this machine; the workspace mount tests are skipped');

/**
 * Issue 15 item 5 with the workspace mount (decision 0140): a run works in its workspace's
 * sandbox on the mounted files, reads data/sample.csv uploaded through the API, and what it
 * writes becomes versions (by the platform) before the run is reported finished; the executed
 * notebook is kept as before. User code finds neither the mount token nor another workspace.
 */
describe.skipIf(!fuse).each(['local', 's3'] as const)(
  `runs on the workspace mount, STORAGE_BACKEND=%s (${process.env.CODEAGENT_TEST_DB ?? 'postgres'})`,
  (backend) => {
    let s3: TestS3Store | undefined;
    let b: TestBackend;
    let jupyter: Kernels;
    let runtime: FastifyInstance;
    let worker: ScheduleWorker;
    let ws: string;
    let other: string;
    const dataDir = mkdtempSync(join(tmpdir(), 'codeagent-mount-run-'));

    let backendBase = '';
    const put = (w: string, path: string, body: string, type = 'text/csv') =>
      b.app.inject({
        method: 'PUT',
        url: `/api/v1/data-resources/${w}/objects/${path}`,
        headers: { ...bearer(b.adminToken), 'content-type': type },
        payload: body,
      });
    const api = (url: string, method = 'GET', payload?: object) =>
      b.app.inject({ method: method as 'GET', url: `/api/v1/workspaces/${ws}/${url}`, headers: bearer(b.adminToken), ...(payload ? { payload } : {}) });
    const objects = async (w: string) =>
      (await b.app.inject({ method: 'GET', url: `/api/v1/data-resources/${w}/objects?limit=200`, headers: bearer(b.adminToken) })).json<{
        items: { path: string; updated_by: string | null }[];
      }>().items;

    beforeAll(async () => {
      // The same run on S3 storage (s3rver): the mount only talks WebDAV, storage is the backend's.
      if (backend === 's3') s3 = await startTestS3Store('mnt');
      b = await startTestBackend(s3 ? { store: s3.store } : {});
      // Far below the files the tests store: a mounted workspace copies nothing, so it never applies.
      const rig = await startMountedRig(b, { dataDir, log, worker: { concurrency: 1, runTimeoutSeconds: 120, filesMaxBytes: 1024 * 1024 } });
      ({ jupyter, runtime, worker } = rig);
      backendBase = rig.backendUrl;
      const create = async (name: string) =>
        (await b.app.inject({ method: 'POST', url: '/api/v1/platform/workspaces', headers: bearer(b.adminToken), payload: { name } })).json<{ id: string }>()
          .id;
      ws = await create('mount-run');
      other = await create('mount-run-other');
      expect((await put(other, 'secret/other.txt', 'not yours')).statusCode).toBe(201);
      worker.start();
    }, 90_000);
    afterAll(async () => {
      await worker?.stop(5000);
      await runtime?.close();
      await jupyter?.stop();
      await b?.close();
      await s3?.close();
      rmSync(dataDir, { recursive: true, force: true });
    }, 90_000);

    async function run(path: string) {
      const queued = (await api('runs', 'POST', { notebook_path: path })).json<{ id: string }>();
      const deadline = Date.now() + 90_000;
      for (;;) {
        const got = (await api(`runs/${queued.id}`)).json<{ id: string; status: string; error: string | null }>();
        if (!['queued', 'running'].includes(got.status)) return got;
        if (Date.now() > deadline) throw new Error(`run did not finish in time: ${JSON.stringify(got)}\n${logLines.slice(-20).join('')}`);
        await new Promise((r) => setTimeout(r, 250));
      }
    }
    const executedCell = async (path: string, id: string, cell: number) => {
      const res = await b.app.inject({
        method: 'GET',
        url: `/api/v1/data-resources/${ws}/objects/${path.replace(/\.ipynb$/, '.runs')}/${id}.ipynb`,
        headers: bearer(b.adminToken),
      });
      expect(res.statusCode).toBe(200);
      const nb = JSON.parse(res.body) as { cells: { outputs: { text?: string; ename?: string; evalue?: string }[] }[] };
      return nb.cells[cell]!.outputs.map((o) => o.text ?? `${o.ename}: ${o.evalue}`).join('');
    };

    /** The runtime's lab proxy on a port of its own (as the gateway reaches it), and the workspace's contents API through it. */
    const labContents = async () => {
      const lab = labProxy({ pool: jupyter.pool, token: 'lab-token', log });
      const server = createServer((req, res) => lab.request(req, res));
      await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
      const contents = (path: string, method = 'GET', body?: object) =>
        fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/jupyter/${ws}/api/contents/${path}`, {
          method,
          headers: { authorization: 'token lab-token', 'content-type': 'application/json' },
          ...(body ? { body: JSON.stringify(body) } : {}),
        });
      return { contents, close: () => server.close() };
    };

    it('reads data/sample.csv uploaded through the API and writes a result that becomes a version, twice', async () => {
      expect((await put(ws, 'data/sample.csv', 'x,y\n1,2\n3,4\n5,6\n')).statusCode).toBe(201);
      const cells = [
        'import csv, os\nrows = list(csv.DictReader(open("../data/sample.csv")))\ntotal = sum(int(r["x"]) * int(r["y"]) for r in rows)\nprint("rows", len(rows), "total", total, "cwd", os.getcwd())',
        'os.makedirs("../reports", exist_ok=True)\nwith open("../reports/result.csv", "w") as f:\n    f.write(f"total\\n{total}\\n")\nprint("written")',
      ];
      expect((await put(ws, 'jobs/ordinary.ipynb', notebook(cells), 'application/x-ipynb+json')).statusCode).toBe(201);
      const first = await run('jobs/ordinary.ipynb');
      expect(first).toMatchObject({ status: 'succeeded', error: null });
      // The run worked in the mount itself (no copy below .codeagent-runs).
      expect(await executedCell('jobs/ordinary.ipynb', first.id, 0)).toBe('rows 3 total 44 cwd /workspace/jobs\n');
      const result = await b.app.inject({ method: 'GET', url: `/api/v1/data-resources/${ws}/objects/reports/result.csv`, headers: bearer(b.adminToken) });
      expect(result.body).toBe('total\n44\n');
      expect((await objects(ws)).find((o) => o.path === 'reports/result.csv')).toMatchObject({ updated_by: null });

      // New data through the API is seen by the next run at once (the listing cache is dropped).
      expect((await put(ws, 'data/sample.csv', 'x,y\n10,10\n')).statusCode).toBe(200);
      expect(await run('jobs/ordinary.ipynb')).toMatchObject({ status: 'succeeded' });
      const versions = await b.app.inject({ method: 'GET', url: `/api/v1/data-resources/${ws}/versions/reports/result.csv`, headers: bearer(b.adminToken) });
      expect(versions.json<{ items: unknown[] }>().items).toHaveLength(2);
      const latest = await b.app.inject({ method: 'GET', url: `/api/v1/data-resources/${ws}/objects/reports/result.csv`, headers: bearer(b.adminToken) });
      expect(latest.body).toBe('total\n100\n');
      // Nothing of the server's own (checkpoints, run directories) became a workspace file, and the input was only read.
      const paths = (await objects(ws)).map((o) => o.path);
      expect(paths.filter((p) => /ipynb_checkpoints|codeagent-runs|jupyter/.test(p))).toEqual([]);
      const input = await b.app.inject({ method: 'GET', url: `/api/v1/data-resources/${ws}/versions/data/sample.csv`, headers: bearer(b.adminToken) });
      expect(input.json<{ items: unknown[] }>().items).toHaveLength(2);
      // The workspace's server (and its mount) is running: the mount point exists on the host.
      expect(isMounted(join(dataDir, 'mounts', ws))).toBe(true);
      // Its cache is the bounded tmpfs.
      expect(isMounted(join(dataDir, 'mount-state', ws, 'cache'))).toBe(true);
    }, 240_000);

    it('runs a workspace whose files exceed SANDBOX_FILES_MAX_BYTES: nothing is copied, the run reads the file in place', async () => {
      expect((await put(ws, 'data/big.bin', 'b'.repeat(2 * 1024 * 1024))).statusCode).toBe(201);
      expect((await put(ws, 'jobs/big.ipynb', notebook(['import os\nprint(os.path.getsize("../data/big.bin"))']), 'application/x-ipynb+json')).statusCode).toBe(
        201,
      );
      const done = await run('jobs/big.ipynb');
      expect(done).toMatchObject({ status: 'succeeded', error: null });
      expect(await executedCell('jobs/big.ipynb', done.id, 0)).toBe(`${2 * 1024 * 1024}\n`);
      const log = await api(`runs/${done.id}/log`);
      const executed = log.body
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as { event: string; files_copied_in?: number })
        .find((e) => e.event === 'executed');
      expect(executed).toMatchObject({ files_copied_in: 0 });
    }, 240_000);

    it('keeps working after its token expired: the renewed token is read again', async () => {
      const short = new WorkspaceMounts({
        dataDir: join(dataDir, 'short'),
        davUrl: (w) => `${backendBase}/api/v1/dav/${w}/`,
        tokenKey: mountTokenKey(INTERNAL_TOKEN),
        log,
        tokenSeconds: 3,
      });
      const mount = await short.mount(other, undefined, false);
      try {
        // Two lifetimes later the first token is long expired; the file holds a renewed one.
        await new Promise((r) => setTimeout(r, 7000));
        await writeFile(join(mount.dir, 'late.txt'), 'after expiry');
        await mount.flush();
        // The upload with the expired token is refused (401), rclone reads the file again and
        // retries; what this proves is that the file arrives, not how fast.
        await expect.poll(async () => (await objects(other)).map((o) => o.path), { timeout: 20_000, interval: 250 }).toContain('late.txt');
      } finally {
        await mount.unmount();
      }
      expect(isMounted(join(dataDir, 'short', 'mounts', other))).toBe(false);
    }, 60_000);

    it('a flush answers once every file a process closed by exiting is stored, without a quiet second (fusectl)', async () => {
      const mounts = new WorkspaceMounts({
        dataDir: join(dataDir, 'flush'),
        davUrl: (w) => `${backendBase}/api/v1/dav/${w}/`,
        tokenKey: mountTokenKey(INTERNAL_TOKEN),
        log,
      });
      const mount = await mounts.mount(other, undefined, false);
      try {
        const ends: string[] = [];
        for (let round = 0; round < 5; round++) {
          // 40 files written and left open; the process exits, and the kernel sends rclone their
          // releases (which queue the uploads) after it is gone: a flush must wait for them.
          const script = [
            'import os, sys',
            `fs = [open(os.path.join(sys.argv[1], f"r${round}-{j}.txt"), "w") for j in range(40)]`,
            'for j, f in enumerate(fs): f.write(str(j)); f.flush()',
            'os._exit(0)',
          ].join('\n');
          await new Promise<void>((ok, fail) =>
            spawn('python3', ['-c', script, mount.dir], { stdio: 'inherit' }).once('exit', (code) =>
              code === 0 ? ok() : fail(new Error(`python3 exited ${code}`)),
            ),
          );
          ends.push(await mount.flush());
          const listed = await b.app.inject({ method: 'GET', url: `/api/v1/data-resources/${other}/objects?prefix=r${round}-`, headers: bearer(b.adminToken) });
          expect(listed.json<{ items: unknown[] }>().items, `flush ended ${ends.join(', ')}`).toHaveLength(40);
        }
        // As root the runtime mounts fusectl where the system did not: the flush reads the FUSE
        // connection's unanswered requests instead of waiting for a quiet second (decision 0205).
        expect(ends).toEqual(Array.from({ length: 5 }, () => (process.getuid?.() === 0 ? 'answered' : 'quiet')));
      } finally {
        await mount.unmount();
      }
    }, 120_000);

    it('gives user code neither the mount token, nor the host, nor another workspace', async () => {
      const probe = [
        'import os, glob',
        'found = []',
        'for p in glob.glob("/proc/*/environ") + glob.glob("/proc/*/cmdline"):',
        '    try:',
        '        if b"mnt." in open(p, "rb").read(): found.append(p)',
        '    except Exception: pass',
        `print("token", found, "data", os.path.exists(${JSON.stringify(dataDir)}), "other", os.path.exists("/workspace/secret"), "root", sorted(os.listdir("/")))`,
        'import errno',
        'try:',
        '    with open("/workspace/fill.bin", "wb") as f:',
        '        for i in range(256): f.write(b"\\0" * (1024 * 1024)); f.flush()',
        '    print("filled without limit")',
        'except OSError as e:',
        '    print("fill refused", errno.errorcode.get(e.errno))',
        'try: os.remove("/workspace/fill.bin")',
        'except OSError: pass',
        'try:',
        '    os.symlink("/etc/passwd", "/workspace/link")',
        '    print("symlink made")',
        'except OSError as e:',
        '    print("symlink refused")',
      ].join('\n');
      expect((await put(ws, 'jobs/probe.ipynb', notebook([probe]), 'application/x-ipynb+json')).statusCode).toBe(201);
      const done = await run('jobs/probe.ipynb');
      expect(done.status).toBe('succeeded');
      const out = await executedCell('jobs/probe.ipynb', done.id, 0);
      expect(out).toContain('token [] data False other False');
      expect(out).not.toContain('symlink made');
      // Writing without end fills the mount's bounded cache (SANDBOX_DISK_MB), not the host's disk.
      // rclone 1.60 reports the full cache as EIO, not ENOSPC (decision 0141).
      expect(out).toMatch(/fill refused (EIO|ENOSPC)/);
      expect(out).not.toContain('filled without limit');
      expect(out).not.toContain('mnt.');
      expect((await objects(ws)).map((o) => o.path)).not.toContain('link');
    }, 120_000);

    // rclone uploads a file after its writer's close(2) has returned: a refusal of the platform
    // (here MAX_UPLOAD_BYTES, 10 MiB in this backend; a full disk or the workspace quota alike)
    // reached nobody, and the run was reported succeeded without the file.
    it('a file the platform refuses to store fails the run, naming it and why; one the run removed again does not', async () => {
      // (One after the other: a file rclone could not upload stays in its bounded cache.)
      const cells = [
        'import os, time\nwith open("gone.bin", "wb") as f:\n    f.write(b"x" * (11 * 1024 * 1024))\ntime.sleep(1)\nos.remove("gone.bin")',
        'with open("big.bin", "wb") as f:\n    f.write(b"x" * (11 * 1024 * 1024))\nprint("written")',
      ];
      expect((await put(ws, 'jobs/too-big.ipynb', notebook(cells), 'application/x-ipynb+json')).statusCode).toBe(201);
      const done = await run('jobs/too-big.ipynb');
      expect(done.status).toBe('failed');
      expect(done.error).toMatch(/^files of the workspace could not be stored/);
      expect(done.error).toMatch(/: jobs\/big\.bin: the upload is \d+ bytes; MAX_UPLOAD_BYTES is \d+ \(413 Payload Too Large\)$/);
      expect(done.error).not.toContain('gone.bin');
      // The cells ran (the notebook did not fail) and nothing of it is pretended stored.
      expect(await executedCell('jobs/too-big.ipynb', done.id, 1)).toBe('written\n');
      expect((await objects(ws)).map((o) => o.path)).not.toContain('jobs/big.bin');
      // The next run that stores what it writes succeeds again.
      const small = ['with open("small.bin", "wb") as f:\n    f.write(b"ok")'];
      expect((await put(ws, 'jobs/small.ipynb', notebook(small), 'application/x-ipynb+json')).statusCode).toBe(201);
      expect(await run('jobs/small.ipynb')).toMatchObject({ status: 'succeeded', error: null });
    }, 120_000);

    // The same blind spot in JupyterLab: a save the platform refused looked saved.
    it("a JupyterLab save the platform refuses is answered with the refusal, in JupyterLab's error shape; one it stores as before", async () => {
      const lab = await labContents();
      const save = (path: string, content: string) => lab.contents(path, 'PUT', { type: 'file', format: 'text', content });
      try {
        // A folder made by PUT waits for no upload.
        const started = Date.now();
        const folder = await lab.contents('lab', 'PUT', { type: 'directory' });
        expect(folder.status).toBe(201);
        expect(Date.now() - started).toBeLessThan(1500);

        const small = await save('lab/note.txt', 'kept');
        expect(small.status).toBe(201);
        expect((await b.app.inject({ method: 'GET', url: `/api/v1/data-resources/${ws}/objects/lab/note.txt`, headers: bearer(b.adminToken) })).body).toBe(
          'kept',
        );

        const big = await save('lab/big.txt', 'x'.repeat(11 * 1024 * 1024));
        expect(big.status).toBe(413);
        const said = (await big.json()) as { message: string };
        expect(said.message).toMatch(/^lab\/big\.txt was not stored in the workspace: the upload is \d+ bytes; MAX_UPLOAD_BYTES is \d+ \(413 /);
        expect((await objects(ws)).map((o) => o.path)).not.toContain('lab/big.txt');

        // A copy (JupyterLab's "Duplicate") is a file written too: the copy of a file too big to
        // store is refused the same way, naming the copy.
        const post = (folder: string, body: object) => lab.contents(folder, 'POST', body);
        const copy = await post('lab', { copy_from: 'lab/big.txt' });
        expect(copy.status).toBe(413);
        expect(((await copy.json()) as { message: string }).message).toMatch(/^lab\/big-Copy1\.txt was not stored in the workspace: the upload is \d+ bytes/);
        // "New File" and "New Notebook" are answered once stored (two: about 160 ms).
        const created = await post('lab', { type: 'file', ext: '.txt' });
        expect(created.status).toBe(201);
        const createdPath = ((await created.json()) as { path: string }).path;
        expect((await post('lab', { type: 'notebook' })).status).toBe(201);
        expect((await objects(ws)).map((o) => o.path)).toContain(createdPath);

        // Saves at once share the looks at rclone's transfers; each is answered once stored.
        const many = await Promise.all(Array.from({ length: 12 }, (_, i) => save(`lab/many-${i}.txt`, `n${i}`)));
        expect(many.map((r) => r.status)).toEqual(Array<number>(12).fill(201));
        const stored = (await objects(ws)).map((o) => o.path);
        for (let i = 0; i < 12; i++) expect(stored).toContain(`lab/many-${i}.txt`);
      } finally {
        lab.close();
      }
    }, 120_000);

    // Decision 0220: the mount showed one fixed time for every file (JupyterLab's file browser
    // showed no real time, and JupyterLab could not see that someone else had changed an open
    // file); with real times, an upload's end changed the time of the file just saved, and
    // JupyterLab asked "File Changed" at the next save. The writer's own time is kept instead.
    it("a file's time in JupyterLab is its writer's: it stays when the upload ends, and a change through the API is newer, content too", async () => {
      const lab = await labContents();
      const { contents } = lab;
      const onDisk = async () => Date.parse(((await (await contents('lab-times.txt?content=0')).json()) as { last_modified: string }).last_modified);
      try {
        const saved = await contents('lab-times.txt', 'PUT', { type: 'file', format: 'text', content: 'mine' });
        expect(saved.status).toBe(201);
        const mine = Date.parse(((await saved.json()) as { last_modified: string }).last_modified);
        expect(Math.abs(Date.now() - mine)).toBeLessThan(10_000);
        // Stored (the answer waited for the upload) and listed afresh (the rig's directory cache
        // is 1 s): still the time JupyterLab was answered, so its next save asks nothing.
        for (let i = 0; i < 5; i++) {
          await new Promise((r) => setTimeout(r, 600));
          expect((await onDisk()) - mine).toBeLessThanOrEqual(500);
        }
        // Someone else's change (through the API, a second and a half later) is newer by more
        // than JupyterLab's margin of 500 ms: its next save asks before overwriting it.
        await new Promise((r) => setTimeout(r, 1500));
        expect((await put(ws, 'lab-times.txt', 'theirs', 'text/plain')).statusCode).toBe(200);
        const deadline = Date.now() + 10_000;
        while ((await onDisk()) - mine <= 500 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
        expect((await onDisk()) - mine).toBeGreaterThan(500);
        // And its content, not the one the mount wrote (rclone kept that file's old size and
        // content until its folder was listed again: the runtime lists it on the change, 0221).
        expect(((await (await contents('lab-times.txt')).json()) as { content: string }).content).toBe('theirs');
      } finally {
        lab.close();
      }
    }, 120_000);

    // Jupyter's own manager closed the file after each part of a chunked upload (JupyterLab's
    // file browser, files over 1 MiB): every part became an upload and a version of the whole
    // file so far (decision 0219).
    it('a file JupyterLab uploads in parts becomes one version, stored when the last part is answered', async () => {
      const lab = await labContents();
      const MiB = 1024 * 1024;
      const upload = async (path: string, fill: string, midway?: () => Promise<void>) => {
        const answers: { status: number; model: Record<string, unknown> }[] = [];
        const parts = [1, 2, 3, -1];
        for (const [i, chunk] of parts.entries()) {
          if (i === 2) await midway?.();
          const res = await lab.contents(path, 'PUT', { type: 'file', format: 'base64', chunk, content: Buffer.alloc(MiB, `${fill}${i}`).toString('base64') });
          answers.push({ status: res.status, model: (await res.json()) as Record<string, unknown> });
        }
        return answers;
      };
      const versions = async () =>
        (await b.app.inject({ method: 'GET', url: `/api/v1/data-resources/${ws}/versions/lab/parts.bin`, headers: bearer(b.adminToken) })).json<{
          items: unknown[];
        }>().items;
      try {
        const noFolder = await upload('nowhere/parts.bin', 'a');
        expect(noFolder.map((a) => a.status)).toEqual([404, 404, 404, 404]);
        expect(noFolder[0]!.model.message).toBe('nowhere/parts.bin was not saved: its folder does not exist');
        expect((await lab.contents('lab', 'PUT', { type: 'directory' })).status).toBeLessThan(300);
        const first = await upload('lab/parts.bin', 'a');
        expect(first.map((a) => a.status)).toEqual([201, 200, 200, 200]);
        expect(first.map((a) => a.model.codeagent_upload ?? null)).toEqual(['partial', 'partial', 'partial', null]);
        // Answered once stored: the whole file is there at once, and it is one version.
        const stored = await b.app.inject({ method: 'GET', url: `/api/v1/data-resources/${ws}/objects/lab/parts.bin`, headers: bearer(b.adminToken) });
        expect(stored.rawPayload.length).toBe(4 * MiB);
        expect(stored.rawPayload.subarray(3 * MiB, 3 * MiB + 2).toString()).toBe('a3');
        expect(await versions()).toHaveLength(1);
        // Uploaded again: one version more, not four; half way the platform still serves the
        // whole previous content (the mount uploads nothing before the last part).
        await upload('lab/parts.bin', 'b', async () => {
          const midway = await b.app.inject({ method: 'GET', url: `/api/v1/data-resources/${ws}/objects/lab/parts.bin`, headers: bearer(b.adminToken) });
          expect(midway.rawPayload.length).toBe(4 * MiB);
          expect(midway.rawPayload.subarray(0, 2).toString()).toBe('a0');
        });
        expect(await versions()).toHaveLength(2);
        const replaced = await b.app.inject({ method: 'GET', url: `/api/v1/data-resources/${ws}/objects/lab/parts.bin`, headers: bearer(b.adminToken) });
        expect(replaced.rawPayload.subarray(3 * MiB, 3 * MiB + 2).toString()).toBe('b3');
      } finally {
        lab.close();
      }
    }, 120_000);
  },
);

import { createServer } from 'node:http';
import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import { Type } from '@sinclair/typebox';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import {
  AppError,
  BadRequestError,
  ConflictError,
  NotFoundError,
  OPS_PATHS,
  PayloadTooLargeError,
  ServiceUnavailableError,
  internalTokenHook,
  requestIdOptions,
  serviceKit,
} from '@codeagent/service-kit';
import { SandboxUnavailableError, UnknownWorkspaceError } from '@codeagent/sandbox';
import { FilesLimitError, FilesRequiredError, SandboxFilesError } from './contents.js';
import { KernelUnavailableError } from './jupyter-server.js';
import { UnknownKernelError, type KernelService, type Notebook } from './kernels.js';
import type { LabProxy } from './lab-proxy.js';

export interface RuntimeAppOptions {
  kernels: KernelService;
  internalServiceToken: string;
  loggerInstance?: FastifyBaseLogger;
  /**
   * `/jupyter/<workspace id>/…` (HTTP and websockets) to the workspace's sandboxed JupyterLab:
   * streamed below Fastify (no body parsing), with its own token check (JUPYTERLAB_TOKEN).
   */
  lab?: LabProxy;
}

const Timeout = Type.Optional(Type.Number({ exclusiveMinimum: 0, maximum: 86_400 }));
const KernelId = Type.String({ minLength: 1, maxLength: 64 });
const WORKSPACE_ID = '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$';
const WorkspaceId = Type.Optional(Type.String({ pattern: WORKSPACE_ID }));
const File = Type.Object({ path: Type.String({ minLength: 1, maxLength: 1024 }), content_base64: Type.String() }, { additionalProperties: false });

const Action = Type.Union([
  Type.Object({ action: Type.Literal('start_kernel'), kernel_name: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })), workspace_id: WorkspaceId }),
  Type.Object({ action: Type.Literal('execute'), kernel_id: KernelId, code: Type.String({ maxLength: 10_000_000 }), timeout_seconds: Timeout }),
  Type.Object({ action: Type.Literal('interrupt'), kernel_id: KernelId }),
  Type.Object({ action: Type.Literal('restart'), kernel_id: KernelId }),
  Type.Object({ action: Type.Literal('shutdown'), kernel_id: KernelId }),
  Type.Object({ action: Type.Literal('list_kernels') }),
  // The workspace's next run will find a warm kernel (decision 0209): answers at once.
  Type.Object({
    action: Type.Literal('warm_up'),
    workspace_id: Type.String({ pattern: WORKSPACE_ID }),
    kernel_name: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })),
  }),
  Type.Object({
    action: Type.Literal('run_notebook'),
    notebook: Type.Object(
      { nbformat: Type.Literal(4), cells: Type.Array(Type.Object({ cell_type: Type.String() }, { additionalProperties: true })) },
      { additionalProperties: true },
    ),
    timeout_seconds: Timeout,
    workspace_id: WorkspaceId,
    notebook_path: Type.Optional(Type.String({ minLength: 1, maxLength: 1024 })),
    files: Type.Optional(Type.Array(File, { maxItems: 10_000 })),
    // Without `files`: answer 409 files_required if this runtime would need them (it does not mount the workspace).
    files_on_request: Type.Optional(Type.Boolean()),
  }),
]);

const ACTIONS = ['start_kernel', 'execute', 'interrupt', 'restart', 'shutdown', 'list_kernels', 'run_notebook', 'warm_up'];

/**
 * The runtime's action endpoint (docs/contract/spec.md §5.2): internal, token-guarded, on real Jupyter kernels
 * in sandboxes. `start_kernel` and `run_notebook` take an optional `workspace_id`: the kernel
 * runs in that workspace's sandbox; without it, in the scratch sandbox that holds no
 * workspace's files. `run_notebook` also takes the workspace's `files` (copied in for the run)
 * and answers with the files the run created or changed.
 */
export async function buildRuntimeApp(opts: RuntimeAppOptions): Promise<FastifyInstance> {
  const app = Fastify({
    ...(opts.loggerInstance ? { loggerInstance: opts.loggerInstance } : { logger: false }),
    ...requestIdOptions(),
    // Files travel base64-encoded: 4/3 of SANDBOX_FILES_MAX_BYTES, plus the notebook.
    bodyLimit: Math.max(64 * 1024 * 1024, Math.ceil((opts.kernels.filesMaxBytes * 4) / 3) + 64 * 1024 * 1024),
    ...(opts.lab ? { serverFactory: labServerFactory(opts.lab) } : {}),
  }).withTypeProvider<TypeBoxTypeProvider>();
  await app.register(serviceKit);
  const { kernels } = opts;
  if (opts.lab) {
    const lab = opts.lab;
    app.addHook('preClose', (done) => {
      lab.closeAll();
      done();
    });
  }

  // Probes and metrics answer without the token (the internal port is not published).
  app.addHook('onRequest', internalTokenHook(opts.internalServiceToken, { skip: (req) => OPS_PATHS.has(req.url.split('?')[0]!) }));

  // An unknown action is a 400 naming the valid ones, before the schema's union error.
  app.addHook('preValidation', (req, _reply, done) => {
    const action = (req.body as { action?: unknown } | undefined)?.action;
    if (req.url.startsWith('/api/v1/jupyter') && !ACTIONS.includes(String(action))) {
      return done(new BadRequestError(`unknown action ${JSON.stringify(action)}; use one of ${ACTIONS.join(', ')}`, { action: 'unknown action' }));
    }
    done();
  });

  app.post('/api/v1/jupyter', { schema: { body: Action } }, async (req, reply) => {
    const body = req.body;
    // The caller hanging up (the worker cancelled the run) stops the run's kernel.
    const abort = new AbortController();
    reply.raw.once('close', () => {
      if (!reply.raw.writableFinished) abort.abort();
    });
    try {
      switch (body.action) {
        case 'start_kernel':
          return { kernel_id: await kernels.startKernel(body.kernel_name ?? 'python3', body.workspace_id?.toLowerCase()) };
        case 'execute':
          return await kernels.execute(body.kernel_id, body.code, body.timeout_seconds);
        case 'interrupt':
          return await kernels.interrupt(body.kernel_id).then((k) => ({ kernel_id: k.kernel_id, status: k.execution_state }));
        case 'restart':
          return await kernels.restart(body.kernel_id).then((k) => ({ kernel_id: k.kernel_id, status: k.execution_state }));
        case 'shutdown':
          await kernels.shutdown(body.kernel_id);
          return { kernel_id: body.kernel_id, status: 'shutdown' };
        case 'list_kernels':
          return { kernels: await kernels.list() };
        case 'warm_up':
          return { warming: kernels.warmUp(body.workspace_id.toLowerCase(), body.kernel_name ?? 'python3') };
        case 'run_notebook':
          return await kernels.runNotebook(body.notebook as unknown as Notebook, body.timeout_seconds, {
            workspaceId: body.workspace_id?.toLowerCase(),
            notebookPath: body.notebook_path,
            files: body.files,
            filesOnRequest: body.files_on_request,
            signal: abort.signal,
          });
      }
    } catch (err) {
      if (err instanceof UnknownKernelError || err instanceof UnknownWorkspaceError) throw new NotFoundError(err.message);
      if (err instanceof KernelUnavailableError || err instanceof SandboxUnavailableError) throw new ServiceUnavailableError('kernel_unavailable', err.message);
      if (err instanceof FilesLimitError) throw new PayloadTooLargeError(err.message);
      if (err instanceof FilesRequiredError) throw new ConflictError(err.message, 'files_required');
      if (err instanceof SandboxFilesError) throw new AppError(507, 'insufficient_storage', err.message);
      if (err instanceof AppError) throw err;
      throw err;
    }
  });

  return app;
}

/** An HTTP server that hands `/jupyter/…` to the lab proxy and everything else to Fastify. */
function labServerFactory(lab: LabProxy) {
  return (handler: Parameters<typeof createServer>[1]) => {
    const server = createServer((req, res) => (lab.handles(req.url) ? lab.request(req, res) : handler!(req, res)));
    server.on('upgrade', (req, socket, head) => {
      if (lab.handles(req.url)) lab.upgrade(req, socket, head);
      else socket.end('HTTP/1.1 404 Not Found\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
    });
    return server;
  };
}

import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import { Type, type Static } from '@sinclair/typebox';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { safeEqual } from '@codeagent/auth';
import { AppError, BadRequestError, NotFoundError, ServiceUnavailableError, UnauthorizedError, requestIdOptions, serviceKit } from '@codeagent/service-kit';
import { KernelUnavailableError } from './jupyter-server.js';
import { UnknownKernelError, type KernelService, type Notebook } from './kernels.js';

export interface RuntimeAppOptions {
  kernels: KernelService;
  internalServiceToken: string;
  loggerInstance?: FastifyBaseLogger;
}

const Timeout = Type.Optional(Type.Number({ exclusiveMinimum: 0, maximum: 86_400 }));
const KernelId = Type.String({ minLength: 1, maxLength: 64 });

const Action = Type.Union([
  Type.Object({ action: Type.Literal('start_kernel'), kernel_name: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })) }),
  Type.Object({ action: Type.Literal('execute'), kernel_id: KernelId, code: Type.String({ maxLength: 10_000_000 }), timeout_seconds: Timeout }),
  Type.Object({ action: Type.Literal('interrupt'), kernel_id: KernelId }),
  Type.Object({ action: Type.Literal('restart'), kernel_id: KernelId }),
  Type.Object({ action: Type.Literal('shutdown'), kernel_id: KernelId }),
  Type.Object({ action: Type.Literal('list_kernels') }),
  Type.Object({
    action: Type.Literal('run_notebook'),
    notebook: Type.Object({ nbformat: Type.Literal(4), cells: Type.Array(Type.Object({ cell_type: Type.String() }, { additionalProperties: true })) }, { additionalProperties: true }),
    timeout_seconds: Timeout,
  }),
]);
type ActionBody = Static<typeof Action>;

const ACTIONS = ['start_kernel', 'execute', 'interrupt', 'restart', 'shutdown', 'list_kernels', 'run_notebook'];

/** The runtime's action endpoint (SPEC §5.2): internal, token-guarded, on real Jupyter kernels. */
export async function buildRuntimeApp(opts: RuntimeAppOptions): Promise<FastifyInstance> {
  const app = Fastify({
    ...(opts.loggerInstance ? { loggerInstance: opts.loggerInstance } : { logger: false }),
    ...requestIdOptions(),
    bodyLimit: 64 * 1024 * 1024,
  }).withTypeProvider<TypeBoxTypeProvider>();
  await app.register(serviceKit);
  const { kernels } = opts;

  app.addHook('onRequest', async (req) => {
    const given = req.headers['x-internal-service-token'];
    if (typeof given !== 'string' || !safeEqual(given, opts.internalServiceToken)) {
      throw new UnauthorizedError('send the internal service token in X-Internal-Service-Token');
    }
  });

  // An unknown action is a 400 naming the valid ones, before the schema's union error.
  app.addHook('preValidation', async (req) => {
    const action = (req.body as { action?: unknown } | undefined)?.action;
    if (req.url.startsWith('/api/v1/jupyter') && !ACTIONS.includes(String(action))) {
      throw new BadRequestError(`unknown action ${JSON.stringify(action)}; use one of ${ACTIONS.join(', ')}`, { action: 'unknown action' });
    }
  });

  app.post('/api/v1/jupyter', { schema: { body: Action } }, async (req) => {
    const body = req.body as ActionBody;
    try {
      switch (body.action) {
        case 'start_kernel':
          return { kernel_id: await kernels.startKernel(body.kernel_name ?? 'python3') };
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
        case 'run_notebook':
          return await kernels.runNotebook(body.notebook as unknown as Notebook, body.timeout_seconds);
      }
    } catch (err) {
      if (err instanceof UnknownKernelError) throw new NotFoundError(err.message);
      if (err instanceof KernelUnavailableError) throw new ServiceUnavailableError('kernel_unavailable', err.message);
      if (err instanceof AppError) throw err;
      throw err;
    }
  });

  return app;
}

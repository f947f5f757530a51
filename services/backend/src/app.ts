import Fastify, { type FastifyInstance, type FastifyServerOptions } from 'fastify';
import cookie from '@fastify/cookie';
import swagger from '@fastify/swagger';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { Kysely } from 'kysely';
import type { DB } from '@codeagent/db';
import { requestIdOptions, serviceKit } from '@codeagent/service-kit';
import { userAuth } from '@codeagent/service-kit';
import { authRoutes } from './routes/auth.js';
import { healthRoutes, type Probe } from './routes/health.js';
import { platformRoutes } from './routes/platform.js';
import { runsRoutes } from './routes/runs.js';
import { dataResourcesRoutes } from './routes/data-resources.js';
import { internalRoutes } from './routes/internal.js';
import { WorkspaceFiles, type ObjectStore } from '@codeagent/storage';
import { ErrorBody } from './routes/schemas.js';

export interface BackendAppOptions {
  db: Kysely<DB>;
  jwtSecret: string;
  jwtTtlSeconds: number;
  storageProbe: Probe;
  runtimeProbe: Probe;
  store: ObjectStore;
  internalServiceToken: string;
  maxUploadBytes: number;
  logger?: FastifyServerOptions['logger'];
  version?: string;
}

/** Builds the backend (public API under /api/v1) from options: no globals, nothing listens. */
export async function buildBackendApp(opts: BackendAppOptions): Promise<FastifyInstance> {
  const app = Fastify({
    logger: opts.logger ?? false,
    ...requestIdOptions(),
    // Only the gateway on this machine talks to the backend; trust its x-forwarded-* headers.
    trustProxy: ['127.0.0.1', '::1'],
    ajv: { customOptions: { removeAdditional: false, coerceTypes: 'array', useDefaults: true } },
  }).withTypeProvider<TypeBoxTypeProvider>();

  await app.register(serviceKit);
  await app.register(cookie);
  await app.register(swagger, {
    openapi: {
      openapi: '3.0.3',
      info: { title: 'codeagent platform API', version: opts.version ?? '0.1.0' },
      components: {
        securitySchemes: {
          bearer: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT' },
          cookie: { type: 'apiKey', in: 'cookie', name: 'codeagent_session' },
        },
      },
      security: [{ bearer: [] }, { cookie: [] }],
    },
  });
  app.addSchema(ErrorBody);
  await app.register(userAuth, { db: opts.db, jwtSecret: opts.jwtSecret });

  const files = new WorkspaceFiles(opts.db, opts.store, app.log);
  const readRunLog = async (key: string) => (await opts.store.get('run_log', key))?.body;

  await app.register(internalRoutes, { prefix: '/internal/v1', store: opts.store, internalServiceToken: opts.internalServiceToken, maxUploadBytes: opts.maxUploadBytes });

  await app.register(
    async (api) => {
      await api.register(authRoutes, { db: opts.db, jwtSecret: opts.jwtSecret, jwtTtlSeconds: opts.jwtTtlSeconds });
      await api.register(healthRoutes, { db: opts.db, storageProbe: opts.storageProbe, runtimeProbe: opts.runtimeProbe });
      await api.register(platformRoutes, { db: opts.db, prefix: '/platform' });
      await api.register(runsRoutes, { db: opts.db, files, readRunLog, prefix: '/workspaces' });
      await api.register(dataResourcesRoutes, { db: opts.db, files, maxUploadBytes: opts.maxUploadBytes, prefix: '/data-resources' });
      api.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());
    },
    { prefix: '/api/v1' },
  );

  return app;
}

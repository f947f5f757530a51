import Fastify, { type FastifyInstance, type FastifyBaseLogger, type FastifyServerOptions } from 'fastify';
import cookie from '@fastify/cookie';
import swagger from '@fastify/swagger';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { Kysely } from 'kysely';
import type { DB, Database } from '@codeagent/db';
import { WEBDAV_EXTRA_METHODS, requestIdOptions, serviceKit } from '@codeagent/service-kit';
import { userAuth } from '@codeagent/service-kit';
import { SESSION_COOKIE, mountTokenKey } from '@codeagent/auth';
import { routeAccess } from './routes/access.js';
import { authRoutes } from './routes/auth.js';
import { healthRoutes, type Probe } from './routes/health.js';
import { platformRoutes } from './routes/platform.js';
import { runsRoutes, type RuntimeWarmUp } from './routes/runs.js';
import { workspaceMembersRoutes } from './routes/workspace-members.js';
import { archiveRoutes } from './routes/archive.js';
import { dataResourcesRoutes } from './routes/data-resources.js';
import { internalRoutes } from './routes/internal.js';
import { davRoutes } from './routes/dav.js';
import type { ObjectStore } from '@codeagent/storage';
import { WorkspaceFiles } from '@codeagent/files';
import { ErrorBody } from './routes/schemas.js';
import { DEFAULT_RUN_LIMITS, type RunLimits } from './domain/runs.js';
import { DEFAULT_LOGIN_THROTTLE, LoginThrottle, type LoginThrottlePolicy } from './domain/login-throttle.js';

export interface BackendAppOptions {
  db: Kysely<DB>;
  /** GATEWAY_ADDRESSES: where the gateway reaches this backend from, besides loopback (decision 0257). */
  gatewayAddresses?: string[] | undefined;
  jwtSecret: string;
  /** LISTEN for user changes (Database.listen): token checks are then cached (decision 0082), and folder times of WebDAV listings (decision 0237). */
  listen?: Database['listen'] | undefined;
  jwtTtlSeconds: number;
  storageProbe: Probe;
  runtimeProbe: Probe;
  /** Asks the runtime to ready a workspace for its next run (decision 0209); none: the route does nothing. */
  runtimeWarmUp?: RuntimeWarmUp | undefined;
  store: ObjectStore;
  internalServiceToken: string;
  maxUploadBytes: number;
  /** SCHEDULE_MIN_INTERVAL_SECONDS, MAX_SCHEDULES_PER_WORKSPACE, MAX_QUEUED_RUNS_PER_WORKSPACE (defaults of docs/contract/spec.md §2). */
  runLimits?: RunLimits;
  /** WORKSPACE_QUOTA_BYTES; undefined = no quota. */
  workspaceQuotaBytes?: number | undefined;
  logger?: FastifyServerOptions['logger'];
  /** The component's logger (`createLogger` of service-kit: LOG_FORMAT, redaction); instead of `logger`. */
  loggerInstance?: FastifyBaseLogger;
  version?: string;
  /** Login throttling (docs/contract/spec.md §4.5); the defaults suit a server, tests may tighten or relax them. */
  loginThrottle?: Partial<LoginThrottlePolicy>;
}

/** Where the public API lives; the OpenAPI document lists nothing else. */
const PUBLIC_PREFIX = '/api/v1/';

/** Builds the backend (public API under /api/v1) from options: no globals, nothing listens. */
export async function buildBackendApp(opts: BackendAppOptions): Promise<FastifyInstance> {
  const app = Fastify({
    ...(opts.loggerInstance ? { loggerInstance: opts.loggerInstance } : { logger: opts.logger ?? false }),
    ...requestIdOptions(),
    // Only the gateway talks to the backend: trust its x-forwarded-* headers, from this machine
    // or from where GATEWAY_ADDRESSES says it is (containers), and nobody else's.
    trustProxy: ['127.0.0.1', '::1', ...(opts.gatewayAddresses ?? [])],
    ajv: { customOptions: { removeAdditional: false, coerceTypes: 'array', useDefaults: true } },
  }).withTypeProvider<TypeBoxTypeProvider>();

  // WebDAV's methods (the tree under /api/v1/dav), with a body where RFC 4918 allows one.
  for (const method of WEBDAV_EXTRA_METHODS) app.addHttpMethod(method, { hasBody: true });
  await app.register(serviceKit);
  await app.register(cookie);
  await app.register(swagger, {
    openapi: {
      openapi: '3.0.3',
      info: { title: 'codeagent platform API', version: opts.version ?? '0.1.0' },
      components: {
        securitySchemes: {
          bearer: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT' },
          cookie: { type: 'apiKey', in: 'cookie', name: SESSION_COOKIE },
        },
      },
      security: [{ bearer: [] }, { cookie: [] }],
    },
    // The public document lists the public API only: `/internal/v1/*` (reached by the platform's
    // own components, never through the gateway) and anything else outside PUBLIC_PREFIX stay out.
    transform: ({ schema, url }) => ({ schema: url.startsWith(PUBLIC_PREFIX) ? schema : { ...schema, hide: true }, url }),
  });
  app.addSchema(ErrorBody);
  await app.register(userAuth, {
    db: opts.db,
    jwtSecret: opts.jwtSecret,
    listen: opts.listen,
    // The runtime's workspace mounts (decision 0140): accepted by the WebDAV tree only.
    mountTokenKey: opts.internalServiceToken ? mountTokenKey(opts.internalServiceToken) : undefined,
  });
  // Every public route declares who may call it (config.access); one hook enforces it (decision 0122).
  await app.register(routeAccess, { db: opts.db, prefix: PUBLIC_PREFIX });

  const files = new WorkspaceFiles(opts.db, opts.store, app.log, { quotaBytes: opts.workspaceQuotaBytes });
  if (opts.listen) {
    // Folder times of the WebDAV listings are kept while the changes of files are followed (decision 0237).
    const following = files.followChanges(opts.listen);
    app.addHook('onClose', () => following.close());
  }
  const throttle = new LoginThrottle(opts.db, { ...DEFAULT_LOGIN_THROTTLE, ...opts.loginThrottle });
  const readRunLog = async (key: string) => (await opts.store.get('run_log', key))?.body;

  await app.register(internalRoutes, {
    prefix: '/internal/v1',
    store: opts.store,
    internalServiceToken: opts.internalServiceToken,
    maxUploadBytes: opts.maxUploadBytes,
  });

  await app.register(
    async (api) => {
      await api.register(authRoutes, { db: opts.db, jwtSecret: opts.jwtSecret, jwtTtlSeconds: opts.jwtTtlSeconds, throttle });
      await api.register(healthRoutes, { db: opts.db, storageProbe: opts.storageProbe, runtimeProbe: opts.runtimeProbe });
      await api.register(platformRoutes, { db: opts.db, throttle, prefix: '/platform' });
      await api.register(runsRoutes, {
        db: opts.db,
        files,
        readRunLog,
        limits: opts.runLimits ?? DEFAULT_RUN_LIMITS,
        warmUp: opts.runtimeWarmUp,
        prefix: '/workspaces',
      });
      await api.register(workspaceMembersRoutes, { db: opts.db, prefix: '/workspaces' });
      await api.register(dataResourcesRoutes, { db: opts.db, files, maxUploadBytes: opts.maxUploadBytes, prefix: '/data-resources' });
      await api.register(archiveRoutes, { db: opts.db, files, prefix: '/data-resources' });
      await api.register(davRoutes, { db: opts.db, files, maxUploadBytes: opts.maxUploadBytes, prefix: '/dav' });
      api.get('/openapi.json', { config: { access: 'public' }, schema: { hide: true } }, () => app.swagger());
    },
    { prefix: '/api/v1' },
  );

  return app;
}

import Fastify, { type FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/**
 * How often the event loop's delay is sampled (`nodejs_eventloop_lag_*`), in ms. prom-client's
 * default, 10, wakes an idle component 100 times a second for the sample alone (decision 0201);
 * every stall of 100 ms or more is still seen.
 */
const EVENT_LOOP_SAMPLE_MS = 100;

/**
 * Metrics of one component (Prometheus text, prom-client; decision 0061): the process's own
 * (`process_*`, `nodejs_*`), HTTP requests and latency by route, and whatever the component adds
 * (`counter`, `gauge`). Every series carries `component`. Served at `/metrics` on the component's
 * internal port only: the ingress never routes `/metrics` (it answers 404 there).
 */
export class Metrics {
  readonly registry = new Registry();
  readonly httpRequests: Counter<'route' | 'method' | 'status_code'>;
  readonly httpDuration: Histogram<'route' | 'method'>;

  constructor(readonly component: string) {
    this.registry.setDefaultLabels({ component });
    collectDefaultMetrics({ register: this.registry, eventLoopMonitoringPrecision: EVENT_LOOP_SAMPLE_MS });
    this.httpRequests = this.counter('codeagent_http_requests_total', 'HTTP requests answered, by route pattern, method and status', [
      'route',
      'method',
      'status_code',
    ]);
    this.httpDuration = new Histogram({
      name: 'codeagent_http_request_duration_seconds',
      help: 'Time to answer an HTTP request (until the response is written), by route pattern',
      labelNames: ['route', 'method'],
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers: [this.registry],
    });
  }

  /** One answered request, by route pattern (bounded series): what every HTTP path records. */
  recordRequest(route: string, method: string, status: number, seconds: number): void {
    this.httpRequests.inc({ route, method, status_code: String(status) });
    this.httpDuration.observe({ route, method }, seconds);
  }

  counter<L extends string>(name: string, help: string, labelNames: readonly L[] = []): Counter<L> {
    return new Counter({ name, help, labelNames, registers: [this.registry] });
  }

  /** A gauge; `collect` (optional) sets its value(s) at each scrape. */
  gauge<L extends string>(name: string, help: string, labelNames: readonly L[] = [], collect?: (g: Gauge<L>) => void | Promise<void>): Gauge<L> {
    return new Gauge({
      name,
      help,
      labelNames,
      registers: [this.registry],
      ...(collect
        ? {
            async collect(this: Gauge<L>) {
              await collect(this);
            },
          }
        : {}),
    });
  }

  text(): Promise<string> {
    return this.registry.metrics();
  }
}

/** The operations routes of every component: never behind a token, never routed by the ingress. */
export const OPS_PATHS: ReadonlySet<string> = new Set(['/livez', '/readyz', '/metrics']);

/** Readiness checks: each resolves true when what it checks can serve (a database, storage, …). */
export type ReadinessChecks = Record<string, () => Promise<boolean>>;

async function settle(check: () => Promise<boolean>, timeoutMs: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([check().catch(() => false), new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), timeoutMs)))]);
  } finally {
    clearTimeout(timer);
  }
}

export interface OpsOptions {
  metrics: Metrics;
  readiness?: ReadinessChecks;
  /** Record HTTP metrics of this app's requests (default true). */
  recordRequests?: boolean;
  /** Serve /metrics, /livez and /readyz on this app (default true; the gateway serves them on a port of its own). */
  serveRoutes?: boolean;
}

/**
 * `/livez` (the process serves: 200 while it runs), `/readyz` (it can do its work: every
 * readiness check passes, and it is not shutting down: 503 otherwise, with each check's result),
 * `/metrics`; and the HTTP metrics of every request of the app (route pattern, not the URL, so
 * the series stay bounded). Register it on the app after its routes or before: hooks reach all.
 */
export const opsRoutes = fp<OpsOptions>(
  // eslint-disable-next-line @typescript-eslint/require-await -- a Fastify plugin stays async: avvio turns a throw while it registers (a route without an access rule, 0122) into a register() error (0130)
  async (app, opts) => {
    const { metrics } = opts;
    let closing = false;
    app.addHook('preClose', (done) => {
      closing = true;
      done();
    });
    if (opts.recordRequests !== false) {
      app.addHook('onResponse', (req, reply, done) => {
        metrics.recordRequest(req.routeOptions.url ?? 'unmatched', req.method, reply.statusCode, reply.elapsedTime / 1000);
        done();
      });
    }
    if (opts.serveRoutes === false) return;
    serve(app, metrics, opts.readiness ?? {}, () => closing);
  },
  { name: '@codeagent/service-kit/ops', fastify: '5.x' },
);

function serve(app: FastifyInstance, metrics: Metrics, readiness: ReadinessChecks, closing: () => boolean): void {
  // Not part of the public API document (the backend's OpenAPI).
  const hide = { schema: { hide: true } as Record<string, unknown> };
  app.get('/livez', hide, async (_req, reply) => reply.header('cache-control', 'no-store').send({ status: 'ok' }));
  app.get('/readyz', hide, async (_req, reply) => {
    const names = Object.keys(readiness);
    const results = await Promise.all(names.map((n) => settle(readiness[n]!, 2000)));
    const checks = Object.fromEntries(names.map((n, i) => [n, results[i] ? 'ok' : 'error']));
    const ready = !closing() && results.every(Boolean);
    return reply
      .code(ready ? 200 : 503)
      .header('cache-control', 'no-store')
      .send({ status: ready ? 'ok' : closing() ? 'stopping' : 'error', checks });
  });
  app.get('/metrics', hide, async (_req, reply) =>
    reply
      .type(metrics.registry.contentType)
      .header('cache-control', 'no-store')
      .send(await metrics.text()),
  );
}

/**
 * A port of its own for /metrics, /livez, /readyz (GATEWAY_METRICS_PORT, WORKER_METRICS_PORT):
 * for the gateway, whose only port is public, and the worker, which has none.
 */
export async function startOpsServer(
  metrics: Metrics,
  host: string,
  port: number,
  readiness: ReadinessChecks = {},
): Promise<{ app: FastifyInstance; url: string; stopping(): void }> {
  const app = Fastify({ logger: false });
  let closing = false;
  serve(app, metrics, readiness, () => closing);
  const url = await app.listen({ host, port });
  return { app, url, stopping: () => (closing = true) };
}

import type { FastifyInstance } from 'fastify';

/**
 * Listens and installs graceful shutdown: on SIGTERM/SIGINT stop accepting, let in-flight
 * requests finish (bounded by `graceMs`), run the app's onClose hooks, exit 0.
 */
export async function listen(app: FastifyInstance, host: string, port: number, graceMs = 10_000): Promise<string> {
  const address = await app.listen({ host, port });
  let closing = false;
  const shutdown = (signal: string) => {
    if (closing) return;
    closing = true;
    app.log.info({ signal }, 'shutting down');
    const timer = setTimeout(() => {
      app.log.warn('graceful shutdown timed out; exiting');
      process.exit(0);
    }, graceMs);
    timer.unref();
    app.close().then(
      () => process.exit(0),
      (err: unknown) => {
        app.log.error({ err }, 'error during shutdown');
        process.exit(1);
      },
    );
  };
  process.once('SIGTERM', () => shutdown('SIGTERM'));
  process.once('SIGINT', () => shutdown('SIGINT'));
  return address;
}

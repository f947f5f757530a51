import { createRequire } from 'node:module';
import type { LogFormat } from '@codeagent/config';
import { pino, type Logger, type LoggerOptions } from 'pino';
import type { PrettyOptions } from 'pino-pretty';

/** Header and field names whose values are secrets: written as `[redacted]` in every format. */
const SECRET_HEADERS = ['authorization', 'proxy-authorization', 'cookie', 'x-internal-service-token', 'x-api-key'];
const SECRET_FIELDS = [
  'password',
  'AuthPassword',
  'password_enc',
  'token',
  'access_token',
  'refresh_token',
  'secret',
  'apiKey',
  'api_key',
  'authorization',
  'cookie',
];

export const REDACTED = '[redacted]';

/** Query parameters that carry secrets (Jupyter's `?token=`, OAuth's `access_token`, …). */
const SECRET_QUERY = /token|password|secret|key|auth|session|cookie|ticket/i;

/** A URL or path with the values of secret-bearing query parameters replaced by `[redacted]`. */
export function redactUrl(url: string): string {
  const q = url.indexOf('?');
  if (q === -1) return url;
  const query = url
    .slice(q + 1)
    .split('&')
    .map((pair) => {
      const eq = pair.indexOf('=');
      const name = eq === -1 ? pair : pair.slice(0, eq);
      return eq !== -1 && SECRET_QUERY.test(decodeURIComponentSafe(name)) ? `${name}=${REDACTED}` : pair;
    })
    .join('&');
  return `${url.slice(0, q)}?${query}`;
}

function decodeURIComponentSafe(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

interface RequestLike {
  method?: string;
  url?: string;
  host?: string;
  ip?: string;
  headers?: Record<string, unknown>;
  socket?: { remoteAddress?: string; remotePort?: number };
}

/**
 * pino options of every component: its name, its level, secrets redacted (headers, fields one
 * level deep, and secret query parameters of the logged URL).
 */
export function loggerOptions(level: string, name: string): LoggerOptions {
  return {
    level,
    name,
    redact: {
      paths: [
        ...SECRET_HEADERS.flatMap((h) => [`req.headers[${JSON.stringify(h)}]`, `headers[${JSON.stringify(h)}]`]),
        'res.headers["set-cookie"]',
        ...SECRET_FIELDS.flatMap((f) => [f, `*.${f}`]),
      ],
      censor: REDACTED,
    },
    serializers: {
      // Fastify's request fields, with the URL's secret query parameters redacted.
      req: (req: RequestLike) => ({
        method: req.method,
        url: typeof req.url === 'string' ? redactUrl(req.url) : req.url,
        host: req.host ?? req.headers?.host,
        remoteAddress: req.ip ?? req.socket?.remoteAddress,
        remotePort: req.socket?.remotePort,
      }),
    },
  };
}

/** The one line of a pretty log record after its time and level: component, request id, message, request. */
function prettyMessage(log: Record<string, unknown>, messageKey: string, withStacks: boolean): string {
  const req = log.req as { method?: string; url?: string } | undefined;
  const res = log.res as { statusCode?: number } | undefined;
  const parts = [typeof log.name === 'string' ? log.name : '-'];
  if (typeof log.reqId === 'string' || typeof log.reqId === 'number') parts.push(`[${log.reqId}]`);
  const message = log[messageKey];
  parts.push(typeof message === 'string' ? message : '');
  // Fastify's request records (req, res, responseTime) and the gateway's access line (method, url, status, ms).
  const method = req?.method ?? log.method;
  const url = req?.url ?? log.url;
  if (typeof method === 'string') parts.push(`${method} ${typeof url === 'string' ? url : ''}`);
  const status = res?.statusCode ?? log.status;
  if (typeof status === 'number') parts.push(String(status));
  // An error is its message on the line; its stack only at LOG_LEVEL=debug (then pino-pretty prints it below).
  const err = log.err as { message?: string; code?: string; type?: string } | undefined;
  if (err?.message !== undefined && !withStacks) parts.push(`(${err.code ?? err.type ?? 'Error'}: ${err.message})`);
  const ms = typeof log.responseTime === 'number' ? log.responseTime : log.ms;
  if (typeof ms === 'number') parts.push(`${ms.toFixed(1)} ms`);
  return parts.join(' ');
}

/** Pretty when asked, or when `auto` and the output is a terminal. */
export function isPrettyFormat(format: LogFormat, output: { isTTY?: boolean } = process.stdout): boolean {
  return format === 'pretty' || (format === 'auto' && output.isTTY === true);
}

/**
 * The logger of a component. JSON lines (one object per line, for a collector) unless the format
 * is pretty: then one readable line per record (`[time] LEVEL: component [request id] message`,
 * other fields appended as JSON), colored on a terminal. Redaction happens before either format.
 */
export function createLogger(options: { level: string; format: LogFormat }, name: string, destination?: NodeJS.WritableStream): Logger {
  const opts = loggerOptions(options.level, name);
  if (!isPrettyFormat(options.format)) return destination ? pino(opts, destination) : pino(opts);
  // Loaded only for a person's terminal: JSON-only deployments never load the formatter.
  const pretty = createRequire(import.meta.url)('pino-pretty') as (o: PrettyOptions) => NodeJS.WritableStream;
  const withStacks = options.level === 'debug' || options.level === 'trace';
  const stream = pretty({
    colorize: destination === undefined && process.stdout.isTTY === true,
    translateTime: 'SYS:HH:MM:ss.l',
    ignore: `pid,hostname,name,reqId,req,res,responseTime,method,url,status,ms${withStacks ? '' : ',err'}`,
    singleLine: true,
    messageFormat: (log, messageKey) => prettyMessage(log, messageKey, withStacks),
    sync: true,
    ...(destination ? { destination } : {}),
  });
  return pino(opts, stream);
}

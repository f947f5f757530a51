import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import { Pool, type Dispatcher } from 'undici';

/** Where a pool reports what it sees; the gateway's logger fits. */
export interface PoolLog {
  warn(obj: object, msg: string): void;
  info(obj: object, msg: string): void;
}

export interface UpstreamPoolOptions {
  /** The component's name, for logs and metrics. */
  name: string;
  /** One address per instance (`http://host:port`); the single-address form is a list of one. */
  urls: readonly string[];
  /** Asked every `healthIntervalMs` on each instance when there are several; 2xx/3xx = up. */
  healthPath: string;
  connections: number;
  /** Upstream time limit: headers, and silence between body chunks. */
  timeoutMs: number;
  healthIntervalMs?: number;
  log?: PoolLog;
  /** Called when an instance goes down or comes back (metrics). */
  onState?: (instance: string, up: boolean) => void;
  /** Requests whose answer may be large (routes.ts `largeAnswer`): over `bulk`, as streamed bodies are. */
  bulkAnswer?: (method: string, path: string) => boolean;
}

export interface Instance {
  /** The instance's origin, e.g. http://10.0.0.5:8091. */
  url: string;
  host: string;
  up: boolean;
  pool: Pool;
  /**
   * The connections for requests whose body streams on from the client (`streamsBody`: larger
   * than SMALL_BODY_BYTES, or of unknown length) or whose answer may be large (`bulkAnswer`): as
   * many again as `pool`, so that slow uploads and downloads, however many, never take the
   * connections every other request needs (decision 0258).
   */
  bulk: Pool;
  /** A connection of its own for health checks, so that they never queue behind traffic. */
  probe: Pool;
}

type RequestOptions = Dispatcher.RequestOptions & { origin?: string | URL };
type Callback = (err: Error | null, data?: Dispatcher.ResponseData) => void;

/** What `UpstreamPool.dispatch` reports to: undici's handler calls, once an instance is settled on. */
export interface UpstreamHandler {
  /** Called for each attempt: `abort` cancels the request (the client went away). */
  onConnect(abort: (err?: Error) => void): void;
  /** The answer's head (raw name/value pairs); false pauses the body until `resume`. */
  onHeaders(statusCode: number, rawHeaders: Buffer[], resume: () => void): boolean;
  /** A chunk of the body; false pauses until `resume`. */
  onData(chunk: Buffer): boolean;
  onComplete(): void;
  /** The request failed (`answered`: after its head was reported), on the last instance tried. */
  onError(err: Error, answered: boolean): void;
}

/** Nothing reached the instance: any request may go to another one. */
const NOT_SENT = new Set(['ECONNREFUSED', 'UND_ERR_CONNECT_TIMEOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN']);
/** The connection broke: the instance is gone (killed, restarted) or going. */
const BROKEN = new Set([...NOT_SENT, 'ECONNRESET', 'EPIPE', 'UND_ERR_SOCKET', 'UND_ERR_CLOSED']);
/** Safe to send again after a broken connection (RFC 9110 §9.2.2), when the body can be sent again. */
const IDEMPOTENT = new Set(['GET', 'HEAD', 'OPTIONS', 'PUT', 'DELETE']);

const errorCode = (err: Error): string => String((err as NodeJS.ErrnoException).code ?? (err.cause as NodeJS.ErrnoException | undefined)?.code ?? '');

/** A body that can be sent a second time: none, or bytes in memory (never a stream being read). */
function replayable(body: RequestOptions['body']): boolean {
  return body === undefined || body === null || typeof body === 'string' || Buffer.isBuffer(body) || body instanceof Uint8Array;
}

/**
 * Bodies up to this size are small: the gateway reads them whole before they go on (the fast
 * path, and `InMemoryBody` on the framework's path) and may send them twice; a larger one, or one
 * of unknown length, streams on from the client.
 */
export const SMALL_BODY_BYTES = 64 * 1024;

/**
 * A body the gateway has read whole, where the framework's proxy wants a stream
 * (`req.body`): `request` sends its bytes, over the first pool, and may send them again.
 */
export class InMemoryBody extends Readable {
  constructor(readonly bytes: Buffer) {
    super();
  }
  override _read(): void {
    this.push(this.bytes);
    this.push(null);
  }
}

/**
 * Whether a request's body streams on from the client: it goes over the instance's `bulk`
 * connections (decision 0258). Every body still in the client's hands is, whatever its declared
 * length: a small one sent slowly would hold a connection as long as a large one.
 */
export function streamsBody(opts: { body?: RequestOptions['body'] }): boolean {
  return !replayable(opts.body);
}

/** Rendezvous hashing: the instance with the highest score for `key`; stable while it is up. */
function score(key: string, url: string): number {
  return createHash('sha1').update(key).update('\0').update(url).digest().readUInt32BE(0);
}

/**
 * The instances of one component behind the gateway (issue 18): round robin over the instances
 * that are up, or one instance per affinity key (a user at JupyterLab). An instance whose
 * connection fails is skipped at once and asked again by the health check every few seconds;
 * when none is up, every one is tried (the checks may be wrong; the client gets a 502 otherwise).
 * A request that never reached a failed instance, or an idempotent one without a streamed body
 * whose connection broke, goes once to another instance; anything else fails with a 502, as
 * nginx's `proxy_next_upstream error` does.
 *
 * It speaks the `request(options, callback)` interface that @fastify/reply-from expects of an
 * undici dispatcher; the instance is the one `getUpstream` chose (the request's origin).
 */
export class UpstreamPool {
  readonly name: string;
  readonly instances: readonly Instance[];
  private readonly byOrigin = new Map<string, Instance>();
  private readonly log: PoolLog | undefined;
  private readonly onState: ((instance: string, up: boolean) => void) | undefined;
  private readonly healthPath: string;
  private readonly bulkAnswer: ((method: string, path: string) => boolean) | undefined;
  private readonly healthIntervalMs: number;
  private timer: NodeJS.Timeout | undefined;
  private checking = false;
  private turn = 0;

  constructor(opts: UpstreamPoolOptions) {
    if (opts.urls.length === 0) throw new Error(`no address for ${opts.name}`);
    this.name = opts.name;
    this.log = opts.log;
    this.onState = opts.onState;
    this.healthPath = opts.healthPath;
    this.bulkAnswer = opts.bulkAnswer;
    this.healthIntervalMs = opts.healthIntervalMs ?? 2000;
    this.instances = [...new Set(opts.urls.map((u) => new URL(u).origin))].map((origin) => {
      const traffic = () =>
        new Pool(origin, {
          connections: opts.connections,
          pipelining: 1,
          keepAliveTimeout: 60_000,
          headersTimeout: opts.timeoutMs,
          bodyTimeout: opts.timeoutMs,
        });
      const instance: Instance = {
        url: origin,
        host: new URL(origin).host,
        up: true,
        pool: traffic(),
        bulk: traffic(),
        probe: new Pool(origin, { connections: 1, keepAliveTimeout: 10_000, headersTimeout: 2000, bodyTimeout: 2000 }),
      };
      this.byOrigin.set(origin, instance);
      return instance;
    });
    for (const i of this.instances) this.onState?.(i.url, true);
    // One instance: nothing to choose between, so nothing to check.
    if (this.instances.length > 1) {
      this.timer = setInterval(() => void this.checkAll(), this.healthIntervalMs);
      this.timer.unref();
    }
  }

  /** The instance for the next request: round robin over those up, or by `affinity`. */
  pick(affinity?: string, except?: ReadonlySet<Instance>): Instance | undefined {
    const open = this.instances.filter((i) => !except?.has(i));
    const up = open.filter((i) => i.up);
    const candidates = up.length > 0 ? up : open;
    if (candidates.length === 0) return undefined;
    if (affinity !== undefined && affinity !== '') {
      let best = candidates[0]!;
      let bestScore = -1;
      for (const c of candidates) {
        const s = score(affinity, c.url);
        if (s > bestScore) [best, bestScore] = [c, s];
      }
      return best;
    }
    this.turn = (this.turn + 1) % candidates.length;
    return candidates[this.turn]!;
  }

  /** The address `getUpstream` gives @fastify/http-proxy (HTTP and websockets). */
  upstreamFor(affinity?: string): string {
    return this.pick(affinity)!.url;
  }

  /** For @fastify/reply-from (callback) and for the gateway's own calls (promise). */
  request(opts: RequestOptions): Promise<Dispatcher.ResponseData>;
  request(opts: RequestOptions, callback: Callback): void;
  request(opts: RequestOptions, callback?: Callback): Promise<Dispatcher.ResponseData> | void {
    if (!callback) {
      return new Promise((resolve, reject) => this.request(opts, (err, data) => (err ? reject(err) : resolve(data!))));
    }
    const origin = opts.origin === undefined ? undefined : new URL(String(opts.origin)).origin;
    const first = (origin !== undefined ? this.byOrigin.get(origin) : undefined) ?? this.pick()!;
    this.attempt(first, opts.body instanceof InMemoryBody ? { ...opts, body: opts.body.bytes } : opts, callback, new Set());
  }

  private attempt(instance: Instance, opts: RequestOptions, callback: Callback, tried: Set<Instance>): void {
    tried.add(instance);
    const { origin: _origin, ...rest } = opts;
    const headers = { ...(opts.headers as Record<string, string | string[] | undefined>), host: instance.host };
    this.poolFor(instance, opts).request({ ...rest, headers }, (err, data) => {
      if (!err) return callback(null, data);
      const other = this.failedOver(instance, opts, err, tried);
      if (other) return this.attempt(other, opts, callback, tried);
      callback(err);
    });
  }

  /**
   * The gateway's fast path: undici's handler interface (the answer's raw head and chunks, no
   * stream in between), with the same choice of instance and the same fail-over as `request`:
   * an error before the answer's head may send the request to another instance.
   */
  dispatch(opts: Omit<RequestOptions, 'origin'>, handler: UpstreamHandler): void {
    this.dispatchTo(this.pick()!, opts, handler, new Set());
  }

  private dispatchTo(instance: Instance, opts: Omit<RequestOptions, 'origin'>, handler: UpstreamHandler, tried: Set<Instance>): void {
    tried.add(instance);
    const headers = { ...(opts.headers as Record<string, string | string[] | undefined>), host: instance.host };
    let answered = false;
    this.poolFor(instance, opts).dispatch(
      { ...opts, headers },
      {
        onConnect: (abort) => handler.onConnect(abort),
        onHeaders: (statusCode, rawHeaders, resume) => {
          answered = true;
          return handler.onHeaders(statusCode, rawHeaders, resume);
        },
        onData: (chunk) => handler.onData(chunk),
        onComplete: () => handler.onComplete(),
        onError: (err) => {
          const other = answered ? undefined : this.failedOver(instance, opts, err, tried);
          if (other) this.dispatchTo(other, opts, handler, tried);
          else handler.onError(err, answered);
        },
      },
    );
  }

  /** The instance's connections for a request: `bulk` for a streamed body or an answer that may be large, else the first pool. */
  private poolFor(instance: Instance, opts: Omit<RequestOptions, 'origin'>): Pool {
    const large = streamsBody(opts) || this.bulkAnswer?.(String(opts.method).toUpperCase(), opts.path) === true;
    return large ? instance.bulk : instance.pool;
  }

  /** After `err` on `instance`: the instance to send the request to instead, if any (marks a broken one down). */
  private failedOver(instance: Instance, opts: Omit<RequestOptions, 'origin'>, err: Error, tried: Set<Instance>): Instance | undefined {
    const code = errorCode(err);
    if (!BROKEN.has(code)) return undefined;
    this.markDown(instance, code);
    const again = replayable(opts.body) && (NOT_SENT.has(code) || IDEMPOTENT.has(String(opts.method).toUpperCase()));
    return again ? this.pick(undefined, tried) : undefined;
  }

  private markDown(instance: Instance, reason: string): void {
    if (!instance.up || this.instances.length === 1) return;
    instance.up = false;
    this.onState?.(instance.url, false);
    this.log?.warn({ upstream: this.name, instance: instance.url, reason }, 'upstream instance down; skipping it until its health check passes');
  }

  /** Asks every instance once; exported for tests and readiness. */
  async checkAll(): Promise<void> {
    if (this.checking) return;
    this.checking = true;
    try {
      await Promise.all(
        this.instances.map(async (instance) => {
          let up: boolean;
          try {
            const res = await instance.probe.request({ method: 'GET', path: this.healthPath, headers: { 'x-request-id': `health-check:${this.name}` } });
            await res.body.dump();
            up = res.statusCode < 400;
          } catch {
            up = false;
          }
          if (up && !instance.up) {
            instance.up = true;
            this.onState?.(instance.url, true);
            this.log?.info({ upstream: this.name, instance: instance.url }, 'upstream instance is back');
          } else if (!up && instance.up) {
            this.markDown(instance, 'health check failed');
          }
        }),
      );
    } finally {
      this.checking = false;
    }
  }

  /** True when at least one instance is up (the gateway's readiness). */
  get anyUp(): boolean {
    return this.instances.some((i) => i.up);
  }

  /**
   * Lets requests in flight finish for up to `graceMs`, then aborts what is left: a client that
   * never finishes its upload must not hold the gateway's shutdown (or a test's teardown) open.
   */
  async close(graceMs = 2_000): Promise<void> {
    clearInterval(this.timer);
    const dispatchers = this.instances.flatMap((i) => [i.pool, i.bulk, i.probe]);
    let timer: NodeJS.Timeout | undefined;
    const graceful = Promise.all(dispatchers.map((d) => d.close())).then(() => true);
    const expired = new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), graceMs)));
    const closed = await Promise.race([graceful, expired]);
    clearTimeout(timer);
    if (!closed) await Promise.all(dispatchers.map((d) => d.destroy()));
  }
}

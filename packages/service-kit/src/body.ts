import type { IncomingMessage } from 'node:http';
import { PassThrough, Transform, type Readable } from 'node:stream';

/**
 * The request body as a stream that a consumer may destroy (a size limit, a storage failure)
 * without destroying the connection, so that the error answer still reaches the client; Node
 * discards the unread rest after the answer. A client that goes away mid-upload makes the
 * stream fail, so no consumer waits for an end that never comes.
 */
export function requestBody(raw: IncomingMessage): Readable {
  const body = new PassThrough();
  raw.pipe(body);
  const cutOff = () => {
    if (!raw.complete) body.destroy(new Error('the client closed the connection before the body was complete'));
  };
  raw.once('aborted', cutOff);
  raw.once('close', cutOff);
  raw.once('error', (err) => body.destroy(err));
  // The failure is for the consumer, which may not have begun: a body waiting in a proxy's queue
  // for a connection of a full pool has no listener yet, and an unheard error ends the process
  // (the gateway died of it with every user's connections). A consumer that begins later finds
  // the stream destroyed with its error and fails as it would have.
  body.on('error', () => undefined);
  // A consumer that gave up (limit reached, storage failed) leaves the rest unread; Node does
  // not discard a body that was being read, so drain it here, or a proxy in front of us would
  // wait forever to finish sending it and never pass our answer on.
  body.once('close', () => {
    if (!raw.complete) {
      raw.unpipe(body);
      raw.resume();
    }
  });
  return body;
}

/**
 * `body` with its last chunk held back until `check` answers true (decisions 0261, 0259): whoever
 * reads it gets the whole body only if what was checked before it (the writer's access) still
 * holds once the client has sent it all. Refused, the stream fails with `refused` and a proxy's
 * request is cut short, its body incomplete (a Jupyter server then writes nothing of it).
 */
export function lastChunkWhen(
  body: Readable,
  check: () => Promise<boolean>,
  refused: () => Error = () => new Error('the access ended while the body arrived'),
): Readable {
  let held: Buffer | undefined;
  const out = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      const previous = held;
      held = chunk;
      done(null, previous);
    },
    flush(done) {
      check().then(
        (ok) => (ok ? done(null, held) : done(refused())),
        (err: unknown) => done(err as Error),
      );
    },
  });
  // (As requestBody's: a failure is for the consumer, which may begin later.)
  out.on('error', () => undefined);
  body.once('error', (err) => out.destroy(err));
  body.pipe(out);
  return out;
}

import type { FastifyReply, FastifyRequest } from 'fastify';
import { KeyedSlots, TooManyRequestsError, hasRequestBody } from '@codeagent/service-kit';

/**
 * Requests with a large body one user (or one workspace's mount) has under way at once
 * (decision 0256). Each holds a connection from the gateway to the backend while its body
 * arrives, which may be slowly (a byte every 20 s passes the 60 s silence limit): one editor's
 * 128 slow uploads held every connection of the gateway's pool, and everyone's API waited behind
 * them; any logged-in user's slow JSON bodies, to any route, did the same. Beyond the limit the
 * answer is 429 before anything is read.
 */
export const LARGE_BODIES_PER_USER = 16;
/**
 * Only larger bodies count: the gateway reads a body of at most 64 KiB whole before it sends it
 * on (decision 0243), so a small one never holds a connection while it arrives, and parallel
 * writes of small files stay free. A body of unknown length (chunked) counts.
 */
export const COUNTED_BODY_BYTES = 64 * 1024;
const places = new KeyedSlots(LARGE_BODIES_PER_USER);

/** How many requests with a large body a user has under way on this backend (diagnostics and tests). */
export const largeBodiesUnderWay = (userId: string): number => places.inUse(`user:${userId}`);

/**
 * Takes one of the caller's places for a request with a large body until the request ends, or
 * throws 429; nothing for a request without one. Called once the caller is known, before the
 * body is read (routeAccess's `onRequest`).
 */
export function holdLargeBodyPlace(req: FastifyRequest, reply: FastifyReply): void {
  if (!hasRequestBody(req.raw)) return;
  const declared = req.headers['content-length'];
  if (declared !== undefined && Number(declared) <= COUNTED_BODY_BYTES) return;
  const key = req.mountWorkspace !== undefined ? `mount:${req.mountWorkspace}` : req.user !== undefined ? `user:${req.user.id}` : undefined;
  if (key === undefined) return;
  const release = places.take(key);
  if (release === undefined) {
    throw new TooManyRequestsError(`you have ${LARGE_BODIES_PER_USER} uploads or other large requests under way already: wait until one has ended`);
  }
  reply.raw.once('close', release);
  if (reply.raw.closed) release();
}

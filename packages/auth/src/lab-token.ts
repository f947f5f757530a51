import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { InvalidTokenError, type UserTokenClaims } from './jwt.js';
import { openToken, signToken } from './signed-token.js';

/**
 * The credentials of a workspace's JupyterLab on an origin of its own (LAB_ORIGIN, decision 0263).
 * The platform's session cookie never reaches a lab's host; a browser gets there with
 * - a **ticket**: made at the platform's origin for a session and one workspace, valid for
 *   `LAB_TICKET_SECONDS`, and only together with the state the lab's host gave that same browser
 *   (its SHA-256 is in the ticket), so that a ticket read from a log or sent to someone else opens nothing;
 * - a **pass**, which the lab's host gets for the ticket and keeps as its cookie: the same session
 *   (logout, revocation, a disabled user end it), for that one workspace's JupyterLab and bridge only.
 * Both name the session they stand for, and are checked as it is at every use.
 */
export const LAB_TICKET_PREFIX = 'labt.';
export const LAB_PASS_PREFIX = 'labp.';
/** How long a ticket is good for: the two redirects between the platform's origin and the lab's. */
export const LAB_TICKET_SECONDS = 60;

export interface LabCredential {
  kind: 'ticket' | 'pass';
  /** The one workspace it opens (lower case). */
  workspaceId: string;
  /** The session it stands for, as that session's token says (checked for revocation as the token is). */
  session: UserTokenClaims;
  /** A ticket's: SHA-256 (base64url) of the state of the browser it was made for. */
  stateHash?: string;
  /** A ticket's: its id (random), recorded when it is exchanged, and until when it is good. */
  ticketId?: string;
  ticketExpiresAt?: Date;
}

/** The key of lab tickets and passes, derived from JWT_SECRET: the backend alone makes and checks them. */
export function labTokenKey(jwtSecret: string): Buffer {
  if (!jwtSecret) throw new Error('lab passes need JWT_SECRET');
  return createHmac('sha256', jwtSecret).update('codeagent lab pass').digest();
}

export function isLabToken(token: string): boolean {
  return token.startsWith(LAB_TICKET_PREFIX) || token.startsWith(LAB_PASS_PREFIX);
}

/** A state for a browser: random, kept in a cookie of the lab's host. */
export function newLabState(): string {
  return randomBytes(24).toString('base64url');
}

export function labStateHash(state: string): string {
  return createHash('sha256').update(state).digest('base64url');
}

/** Whether `state` is the one a ticket was made for (constant time). */
export function labStateMatches(credential: LabCredential, state: string | undefined): boolean {
  if (credential.stateHash === undefined || state === undefined || state === '') return false;
  const a = Buffer.from(labStateHash(state));
  const b = Buffer.from(credential.stateHash);
  return a.length === b.length && timingSafeEqual(a, b);
}

const sessionClaims = (s: UserTokenClaims) => ({ sub: s.sub, sid: s.jti, iat: s.iat, exp: s.exp, ...(s.tva === undefined ? {} : { tva: s.tva }) });

/** A state's hash as the lab's host sends it to the platform's origin (the state itself never leaves that host and the browser). */
export function isLabStateHash(value: string): boolean {
  return /^[A-Za-z0-9_-]{43}$/.test(value);
}

/** A ticket to `workspaceId`'s lab for the session `session`, for the browser whose state hashes to `stateHash`. */
export function issueLabTicket(key: Buffer, session: UserTokenClaims, workspaceId: string, stateHash: string, now = Date.now()): string {
  if (!isLabStateHash(stateHash)) throw new InvalidTokenError('malformed lab state hash');
  const until = Math.min(Math.floor(now / 1000) + LAB_TICKET_SECONDS, session.exp);
  const id = randomBytes(16).toString('base64url');
  return signToken(LAB_TICKET_PREFIX, key, { k: 'ticket', ws: workspaceId.toLowerCase(), ...sessionClaims(session), sh: stateHash, until, tid: id });
}

/** The pass a lab's host keeps for a ticket checked by `verifyLabToken`: as long-lived as its session. */
export function issueLabPass(key: Buffer, ticket: LabCredential): { pass: string; expiresAt: Date } {
  return {
    pass: signToken(LAB_PASS_PREFIX, key, { k: 'pass', ws: ticket.workspaceId, ...sessionClaims(ticket.session) }),
    expiresAt: new Date(ticket.session.exp * 1000),
  };
}

/** Checks a ticket's or a pass's signature, shape and expiry; throws InvalidTokenError otherwise. */
export function verifyLabToken(key: Buffer, token: string, now = Date.now()): LabCredential {
  const kind = token.startsWith(LAB_TICKET_PREFIX) ? 'ticket' : 'pass';
  const what = kind === 'ticket' ? 'lab ticket' : 'lab pass';
  const c = openToken(kind === 'ticket' ? LAB_TICKET_PREFIX : LAB_PASS_PREFIX, key, token, what);
  const tva = c.tva;
  // (The kind is signed too: the prefix alone is not, and a ticket must never pass for a pass.)
  if (
    c.k !== kind ||
    typeof c.ws !== 'string' ||
    typeof c.sub !== 'string' ||
    typeof c.sid !== 'string' ||
    typeof c.iat !== 'number' ||
    typeof c.exp !== 'number' ||
    (tva !== undefined && tva !== null && !Number.isSafeInteger(tva)) ||
    (kind === 'ticket' && (typeof c.sh !== 'string' || typeof c.until !== 'number' || typeof c.tid !== 'string'))
  ) {
    throw new InvalidTokenError(`malformed ${what}`);
  }
  const seconds = Math.floor(now / 1000);
  if (c.exp <= seconds) throw new InvalidTokenError(`${what} expired`);
  if (kind === 'ticket' && (c.until as number) <= seconds) throw new InvalidTokenError(`${what} expired`);
  const session: UserTokenClaims = { sub: c.sub, jti: c.sid, iat: c.iat, exp: c.exp, ...(tva === undefined ? {} : { tva: tva as number | null }) };
  return {
    kind,
    workspaceId: c.ws,
    session,
    ...(kind === 'ticket' ? { stateHash: c.sh as string, ticketId: c.tid as string, ticketExpiresAt: new Date((c.until as number) * 1000) } : {}),
  };
}

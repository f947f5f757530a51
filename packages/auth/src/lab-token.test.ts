import { describe, expect, it } from 'vitest';
import { issueLabPass, issueLabTicket, labStateHash, labStateMatches, labTokenKey, newLabState, verifyLabToken, LAB_TICKET_SECONDS } from './lab-token.js';
import { issueMountToken, mountTokenKey, verifyMountToken } from './mount-token.js';
import { verifyUserToken, type UserTokenClaims } from './jwt.js';

const key = labTokenKey('jwt-secret-of-the-test');
const WS = '0b0b0b0b-1111-4222-8333-444455556666';
const now = Date.now();
const session: UserTokenClaims = { sub: 'user-1', jti: 'session-1', iat: now / 1000 - 10, exp: Math.floor(now / 1000) + 3600, tva: null };

describe('lab tickets and passes (decision 0263)', () => {
  it('a ticket names the session, the workspace and the state it was made for; its pass the session and the workspace', () => {
    const state = newLabState();
    const ticket = verifyLabToken(key, issueLabTicket(key, session, WS.toUpperCase(), labStateHash(state), now), now);
    expect(ticket).toMatchObject({ kind: 'ticket', workspaceId: WS, session });
    expect(labStateMatches(ticket, state)).toBe(true);
    expect(labStateMatches(ticket, newLabState())).toBe(false);
    expect(labStateMatches(ticket, undefined)).toBe(false);
    const { pass, expiresAt } = issueLabPass(key, ticket);
    expect(expiresAt.getTime()).toBe(session.exp * 1000);
    const opened = verifyLabToken(key, pass, now);
    expect(opened).toEqual({ kind: 'pass', workspaceId: WS, session });
    // A pass carries no state: no ticket check passes for it.
    expect(labStateMatches(opened, state)).toBe(false);
  });

  it('a ticket lasts a minute, a pass as long as its session', () => {
    const ticket = issueLabTicket(key, session, WS, labStateHash(newLabState()), now);
    expect(() => verifyLabToken(key, ticket, now + (LAB_TICKET_SECONDS + 1) * 1000)).toThrow('lab ticket expired');
    const { pass } = issueLabPass(key, verifyLabToken(key, ticket, now));
    expect(verifyLabToken(key, pass, now + 3000 * 1000).kind).toBe('pass');
    expect(() => verifyLabToken(key, pass, (session.exp + 1) * 1000)).toThrow('lab pass expired');
  });

  it('refuses a changed payload, another key, a mount token and a state hash that is not one', () => {
    const ticket = issueLabTicket(key, session, WS, labStateHash('s'), now);
    const [prefix, payload, signature] = [ticket.slice(0, 5), ...ticket.slice(5).split('.')] as [string, string, string];
    const claims = JSON.parse(Buffer.from(payload, 'base64url').toString()) as Record<string, unknown>;
    const forged = `${prefix}${Buffer.from(JSON.stringify({ ...claims, ws: '99999999-1111-4222-8333-444455556666' })).toString('base64url')}.${signature}`;
    expect(() => verifyLabToken(key, forged, now)).toThrow('invalid lab ticket signature');
    expect(() => verifyLabToken(labTokenKey('another-secret'), ticket, now)).toThrow('invalid lab ticket signature');
    // A ticket relabelled as a pass (same payload and signature, other prefix) is not one.
    expect(() => verifyLabToken(key, `labp.${ticket.slice(5)}`, now)).toThrow('malformed lab pass');
    // Keys are derived per kind: a mount token made with the lab key's secret is no lab token, nor the reverse.
    const mount = issueMountToken(mountTokenKey('jwt-secret-of-the-test'), WS).token;
    expect(() => verifyLabToken(key, mount, now)).toThrow();
    expect(() => verifyMountToken(mountTokenKey('jwt-secret-of-the-test'), ticket)).toThrow('not a mount token');
    expect(() => issueLabTicket(key, session, WS, 'short', now)).toThrow('malformed lab state hash');
  });

  it('is never taken for a user token', async () => {
    const { pass } = issueLabPass(key, verifyLabToken(key, issueLabTicket(key, session, WS, labStateHash('s'), now), now));
    await expect(verifyUserToken(pass, 'jwt-secret-of-the-test')).rejects.toThrow('invalid token');
  });
});

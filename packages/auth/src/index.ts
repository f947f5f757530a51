export { parseBearer, parseBasicPassword } from './bearer.js';
export { safeEqual, matchesAny, tokenFingerprint } from './compare.js';
export { hashPassword, verifyPassword, equalizeTimingForUnknownUser, admitPasswordCheck, configurePasswordHashing, passwordHashingStats } from './password.js';
export { HashingBusyError, HashingGate, defaultHashingLimits } from './hashing-gate.js';
export type { HashingLimits } from './hashing-gate.js';
export { issueUserToken, verifyUserToken, InvalidTokenError } from './jwt.js';
export type { UserTokenClaims, IssuedToken } from './jwt.js';
export { INTERNAL_TOKEN_HEADER, USER_ID_HEADER } from './internal-token.js';
export {
  SESSION_COOKIE,
  SAFE_METHODS,
  sessionCookieOptions,
  readCookie,
  withoutCookie,
  requestCredential,
  isSameOrigin,
  isCrossSiteBrowserRequest,
  refusedCrossSite,
} from './session-cookie.js';
export type { Credential, CredentialSource } from './session-cookie.js';
export { MOUNT_TOKEN_PREFIX, MOUNT_TOKEN_MAX_SECONDS, mountTokenKey, issueMountToken, isMountToken, verifyMountToken } from './mount-token.js';
export type { MountTokenClaims } from './mount-token.js';
export {
  LAB_TICKET_PREFIX,
  LAB_PASS_PREFIX,
  LAB_TICKET_SECONDS,
  labTokenKey,
  isLabToken,
  newLabState,
  labStateHash,
  labStateMatches,
  isLabStateHash,
  issueLabTicket,
  issueLabPass,
  verifyLabToken,
} from './lab-token.js';
export type { LabCredential } from './lab-token.js';
export {
  LAB_COOKIE_NAMES,
  LAB_PASS_COOKIE,
  LAB_STATE_COOKIE,
  LAB_STATE_HEADER,
  LAB_STATE_HASH_HEADER,
  WORKSPACE_HEADER,
  ACCESS_HEADER,
} from './session-cookie.js';

export { parseBearer } from './bearer.js';
export { safeEqual, matchesAny, tokenFingerprint } from './compare.js';
export { hashPassword, verifyPassword, equalizeTimingForUnknownUser } from './password.js';
export { issueUserToken, verifyUserToken, InvalidTokenError } from './jwt.js';
export type { UserTokenClaims, IssuedToken } from './jwt.js';

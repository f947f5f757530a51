/**
 * Per-cluster token buckets: `rate` requests per minute, bursts up to `rate`; 0 = unlimited.
 * In-process: with several cluster-service replicas each enforces the limit on its own share.
 */
export class RateLimiter {
  private readonly buckets = new Map<string, { tokens: number; at: number; rate: number }>();

  constructor(private readonly now: () => number = Date.now) {}

  /** Takes one token; false when the bucket is empty (no request may be sent). */
  take(key: string, ratePerMinute: number): boolean {
    if (ratePerMinute === 0) return true;
    const t = this.now();
    let b = this.buckets.get(key);
    if (!b || b.rate !== ratePerMinute) {
      b = { tokens: ratePerMinute, at: t, rate: ratePerMinute };
      this.buckets.set(key, b);
    }
    b.tokens = Math.min(ratePerMinute, b.tokens + ((t - b.at) / 60_000) * ratePerMinute);
    b.at = t;
    if (b.tokens < 1) return false;
    b.tokens -= 1;
    return true;
  }
}

-- State that several instances of a component share (issue 18): what used to live in one
-- process's memory now lives here, so that two cluster services or two bridges behave as one.

-- /mcp rate limits (SPEC §8.2 rate_limit): one token bucket per cluster, taken atomically.
CREATE TABLE cluster_rate_buckets (
  cluster_id  uuid PRIMARY KEY REFERENCES clusters(id) ON DELETE CASCADE,
  tokens      double precision NOT NULL,
  rate        integer NOT NULL,
  updated_at  timestamptz NOT NULL
);

-- Named leases held by one instance for a bounded time (the bridge's per-session edit lock):
-- taken when free or expired, released by their holder; a holder that dies frees it on expiry.
CREATE TABLE service_leases (
  key         text PRIMARY KEY,
  holder      text NOT NULL,
  expires_at  timestamptz NOT NULL
);
CREATE INDEX service_leases_expires_at ON service_leases (expires_at);

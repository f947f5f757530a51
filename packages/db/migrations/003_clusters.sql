-- Cluster administration (SPEC §8.2, §8.3): cluster records and their audit trail.

CREATE TABLE clusters (
  id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  name          text NOT NULL,
  base_url      text NOT NULL,
  auth_type     text NOT NULL CHECK (auth_type IN ('none', 'simple', 'basic')),
  username      text,
  -- AES-256-GCM with SECRETS_KEY: base64 of iv (12) | tag (16) | ciphertext. Never returned.
  password_enc  text,
  rate_limit    integer NOT NULL CHECK (rate_limit >= 0),
  description   text,
  created_at    timestamptz(3) NOT NULL DEFAULT now(),
  updated_at    timestamptz(3) NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX clusters_name_key ON clusters (name);

CREATE TABLE audit_entries (
  id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  occurred_at timestamptz(3) NOT NULL DEFAULT clock_timestamp(),
  actor       text NOT NULL,
  action      text NOT NULL,
  target_type text NOT NULL,
  target_id   uuid NOT NULL,
  details     jsonb NOT NULL
);
-- Newest first, optionally by target or action: each filter has its own index.
CREATE INDEX audit_entries_newest ON audit_entries (occurred_at DESC, id DESC);
CREATE INDEX audit_entries_target ON audit_entries (target_id, occurred_at DESC, id DESC);
CREATE INDEX audit_entries_action ON audit_entries (action, occurred_at DESC, id DESC);

-- Users, platform roles, workspaces and members (SPEC §4.1, §4.2).
-- Times are stored with millisecond precision (timestamptz(3)): exactly what JSON carries, so keyset cursors built from them are exact.

CREATE TABLE platform_roles (
  id          text PRIMARY KEY,
  name        text NOT NULL,
  description text NOT NULL DEFAULT ''
);

INSERT INTO platform_roles (id, name, description) VALUES
  ('admin', 'System administrator', 'Manages users and workspaces of the whole platform'),
  ('user',  'User', 'Works in the workspaces it is a member of');

CREATE TABLE users (
  id               uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  email            text NOT NULL,
  name             text NOT NULL,
  password_hash    text NOT NULL,
  platform_role_id text NOT NULL REFERENCES platform_roles (id),
  created_at       timestamptz(3) NOT NULL DEFAULT now(),
  updated_at       timestamptz(3) NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX users_email_key ON users (lower(email));
CREATE INDEX users_created_at_id ON users (created_at, id);

-- Tokens revoked by logout, kept until they would have expired anyway.
CREATE TABLE revoked_tokens (
  jti        uuid PRIMARY KEY,
  expires_at timestamptz(3) NOT NULL
);

CREATE TABLE workspaces (
  id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  name        text NOT NULL,
  description text NOT NULL DEFAULT '',
  created_at  timestamptz(3) NOT NULL DEFAULT now(),
  updated_at  timestamptz(3) NOT NULL DEFAULT now(),
  deleted_at  timestamptz(3)
);
CREATE INDEX workspaces_created_at_id ON workspaces (created_at, id);

CREATE TABLE workspace_members (
  workspace_id uuid NOT NULL REFERENCES workspaces (id),
  user_id      uuid NOT NULL REFERENCES users (id),
  role         text NOT NULL CHECK (role IN ('admin', 'editor', 'viewer')),
  created_at   timestamptz(3) NOT NULL DEFAULT now(),
  updated_at   timestamptz(3) NOT NULL DEFAULT now(),
  deleted_at   timestamptz(3),
  PRIMARY KEY (workspace_id, user_id)
);
CREATE INDEX workspace_members_user ON workspace_members (user_id) WHERE deleted_at IS NULL;

-- Notebook bridge sessions per user (SPEC §9.3, issue 12): one user, workspace and notebook path =
-- one code-agent session. Before, the key was the notebook path alone, so strangers with the
-- same `Untitled.ipynb` shared a session (and its prompt history, i.e. each other's cells).
--
-- The old rows are dropped, not migrated: a mapping keyed by path alone has no owner, and giving
-- it to any one user would hand that user a session others wrote into. The sessions stay on the
-- code-agent server, unreferenced; each user's next edit creates a fresh one.
DROP TABLE bridge_sessions;

CREATE TABLE bridge_sessions (
  id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  user_id       uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  -- Set when the request comes through /jupyter/{ws}/; NULL for the bridge's own routes.
  workspace_id  uuid REFERENCES workspaces (id) ON DELETE CASCADE,
  notebook_path text NOT NULL,
  session_id    text NOT NULL,
  upstream_url  text NOT NULL,
  created_at    timestamptz(3) NOT NULL DEFAULT now(),
  last_used_at  timestamptz(3) NOT NULL DEFAULT now()
);
-- One mapping per (user, workspace, path). Two partial indexes rather than NULLS NOT DISTINCT,
-- which PostgreSQL before 15 does not know.
CREATE UNIQUE INDEX bridge_sessions_user_path ON bridge_sessions (user_id, notebook_path) WHERE workspace_id IS NULL;
CREATE UNIQUE INDEX bridge_sessions_user_workspace_path ON bridge_sessions (user_id, workspace_id, notebook_path) WHERE workspace_id IS NOT NULL;
CREATE INDEX bridge_sessions_user_last_used ON bridge_sessions (user_id, last_used_at DESC);

-- Notebook bridge (SPEC §9.3): one code-agent session per notebook path, kept across restarts.
CREATE TABLE bridge_sessions (
  notebook_path text PRIMARY KEY,
  session_id    text NOT NULL,
  upstream_url  text NOT NULL,
  created_at    timestamptz(3) NOT NULL DEFAULT now(),
  last_used_at  timestamptz(3) NOT NULL DEFAULT now()
);

-- One stable, unprivileged sandbox uid per workspace (issue 13): uid = SANDBOX_UID_BASE + slot.
-- Allocated once, on the workspace's first kernel, and never reused for another workspace.
CREATE TABLE sandbox_identities (
  workspace_id uuid PRIMARY KEY REFERENCES workspaces (id),
  slot         integer NOT NULL UNIQUE CHECK (slot > 0),
  created_at   timestamptz(3) NOT NULL DEFAULT now()
);

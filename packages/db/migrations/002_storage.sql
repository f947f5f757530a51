-- Data resources (SPEC §4.3, §6): metadata here, content in the storage areas.
-- Content is stored under opaque keys `{workspace_id}/{version_id}` (workspace and version
-- areas) and `{workspace_id}/{trash_id}` (trash area): an upload never overwrites the bytes a
-- committed row points to, so a failed upload cannot damage the current content.

CREATE TABLE objects (
  workspace_id uuid NOT NULL REFERENCES workspaces (id),
  path         text NOT NULL,
  version_id   uuid NOT NULL,
  size         bigint NOT NULL,
  sha256       text NOT NULL,
  content_type text NOT NULL,
  updated_at   timestamptz(3) NOT NULL DEFAULT now(),
  updated_by   uuid REFERENCES users (id),
  PRIMARY KEY (workspace_id, path)
);

CREATE TABLE object_versions (
  -- The version_id the content had while it was current.
  id           uuid PRIMARY KEY,
  workspace_id uuid NOT NULL REFERENCES workspaces (id),
  path         text NOT NULL,
  size         bigint NOT NULL,
  sha256       text NOT NULL,
  content_type text NOT NULL,
  created_at   timestamptz(3) NOT NULL,
  created_by   uuid REFERENCES users (id),
  replaced_at  timestamptz(3) NOT NULL DEFAULT now()
);
CREATE INDEX object_versions_path ON object_versions (workspace_id, path, replaced_at DESC);

CREATE TABLE trash_items (
  id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  workspace_id uuid NOT NULL REFERENCES workspaces (id),
  path         text NOT NULL,
  version_id   uuid NOT NULL,
  size         bigint NOT NULL,
  sha256       text NOT NULL,
  content_type text NOT NULL,
  updated_at   timestamptz(3) NOT NULL,
  updated_by   uuid REFERENCES users (id),
  deleted_at   timestamptz(3) NOT NULL DEFAULT now(),
  deleted_by   uuid REFERENCES users (id)
);
CREATE INDEX trash_items_workspace ON trash_items (workspace_id, deleted_at DESC, id DESC);

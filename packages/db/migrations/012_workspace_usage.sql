-- The bytes each workspace stores (current objects, kept versions, trash: what
-- WORKSPACE_QUOTA_BYTES counts, decision 0038) kept as a running total, so that admitting a write
-- under a quota costs the same in a workspace of a million files as in an empty one instead of
-- summing all three tables (decision 0200).
--
-- The total is the sum of a workspace's rows here. Every statement that changes objects,
-- object_versions or trash_items appends one row per workspace it touched, with the bytes it
-- added or removed (statement triggers over the statement's transition tables): appending takes
-- no lock another writer waits for, so writes of one workspace run in parallel as before. Folding
-- (files.ts) replaces a workspace's rows by one row holding their sum, inside one statement: each
-- row is deleted by exactly one fold, so the total never changes by folding.
CREATE TABLE workspace_usage (
  id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  workspace_id uuid NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
  bytes        bigint NOT NULL
);
CREATE INDEX workspace_usage_workspace ON workspace_usage (workspace_id) INCLUDE (bytes);

CREATE FUNCTION workspace_usage_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO workspace_usage (workspace_id, bytes)
    SELECT workspace_id, sum(size) FROM added GROUP BY workspace_id HAVING sum(size) <> 0 ORDER BY workspace_id;
  RETURN NULL;
END $$;

CREATE FUNCTION workspace_usage_removed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO workspace_usage (workspace_id, bytes)
    SELECT workspace_id, -sum(size) FROM removed GROUP BY workspace_id HAVING sum(size) <> 0 ORDER BY workspace_id;
  RETURN NULL;
END $$;

CREATE FUNCTION workspace_usage_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO workspace_usage (workspace_id, bytes)
    SELECT workspace_id, sum(size)
    FROM (SELECT workspace_id, size FROM added UNION ALL SELECT workspace_id, -size FROM removed) c
    GROUP BY workspace_id HAVING sum(size) <> 0 ORDER BY workspace_id;
  RETURN NULL;
END $$;

-- The same three triggers on each of the three tables.
DO $$
DECLARE t text;
BEGIN
  FOREACH t IN ARRAY ARRAY['objects', 'object_versions', 'trash_items'] LOOP
    EXECUTE format('CREATE TRIGGER %I AFTER INSERT ON %I REFERENCING NEW TABLE AS added '
      'FOR EACH STATEMENT EXECUTE FUNCTION workspace_usage_added()', t || '_usage_insert', t);
    EXECUTE format('CREATE TRIGGER %I AFTER DELETE ON %I REFERENCING OLD TABLE AS removed '
      'FOR EACH STATEMENT EXECUTE FUNCTION workspace_usage_removed()', t || '_usage_delete', t);
    EXECUTE format('CREATE TRIGGER %I AFTER UPDATE ON %I REFERENCING NEW TABLE AS added OLD TABLE AS removed '
      'FOR EACH STATEMENT EXECUTE FUNCTION workspace_usage_changed()', t || '_usage_update', t);
  END LOOP;
END $$;

-- What the workspaces store today, one row each.
INSERT INTO workspace_usage (workspace_id, bytes)
  SELECT workspace_id, sum(size)
  FROM (
    SELECT workspace_id, size FROM objects
    UNION ALL SELECT workspace_id, size FROM object_versions
    UNION ALL SELECT workspace_id, size FROM trash_items
  ) s
  GROUP BY workspace_id HAVING sum(size) <> 0;

-- The covering indexes of migration 008 served only the sums this replaces.
DROP INDEX objects_workspace_size;
DROP INDEX object_versions_workspace_size;
DROP INDEX trash_items_workspace_size;

-- Every change of a workspace's objects NOTIFYs `workspace_files` with "<workspace id> <folder>"
-- (the folder the object is in, '' at the top), once per folder and statement, delivered at
-- commit (decision 0221). The runtime re-reads that folder in the workspace's mount: rclone's
-- mount kept a file it had written with its old size and content until something listed the
-- folder again, whatever was stored since through the API.
CREATE FUNCTION workspace_files_folder(path text) RETURNS text LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN strpos(path, '/') > 0 THEN left(regexp_replace(path, '/[^/]*$', ''), 7000) ELSE '' END
$$;

CREATE FUNCTION workspace_files_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('workspace_files', c.workspace_id::text || ' ' || c.folder)
    FROM (SELECT DISTINCT workspace_id, workspace_files_folder(path) AS folder FROM added) c;
  RETURN NULL;
END $$;

CREATE FUNCTION workspace_files_removed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('workspace_files', c.workspace_id::text || ' ' || c.folder)
    FROM (SELECT DISTINCT workspace_id, workspace_files_folder(path) AS folder FROM removed) c;
  RETURN NULL;
END $$;

CREATE FUNCTION workspace_files_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('workspace_files', c.workspace_id::text || ' ' || c.folder)
    FROM (
      SELECT workspace_id, workspace_files_folder(path) AS folder FROM added
      UNION
      SELECT workspace_id, workspace_files_folder(path) FROM removed
    ) c;
  RETURN NULL;
END $$;

CREATE TRIGGER objects_notify_insert AFTER INSERT ON objects REFERENCING NEW TABLE AS added
  FOR EACH STATEMENT EXECUTE FUNCTION workspace_files_added();
CREATE TRIGGER objects_notify_delete AFTER DELETE ON objects REFERENCING OLD TABLE AS removed
  FOR EACH STATEMENT EXECUTE FUNCTION workspace_files_removed();
CREATE TRIGGER objects_notify_update AFTER UPDATE ON objects REFERENCING NEW TABLE AS added OLD TABLE AS removed
  FOR EACH STATEMENT EXECUTE FUNCTION workspace_files_changed();

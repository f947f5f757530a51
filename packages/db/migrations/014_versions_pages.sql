-- The versions of a path in pages, newest first (decision 0208): the order of the list
-- (replaced, then created, then id, all descending) as an index, so that a page reads its own
-- rows whatever number of versions the path keeps. It replaces the index of (workspace_id, path,
-- replaced_at DESC), whose prefix it has.
CREATE INDEX object_versions_page ON object_versions (workspace_id, path, replaced_at DESC, created_at DESC, id DESC);
DROP INDEX object_versions_path;

-- The object whose current content is a given version: content copied ahead of a transaction
-- that then did not keep it is removed only once no object holds that version (decision 0235).
CREATE INDEX objects_version ON objects (version_id);

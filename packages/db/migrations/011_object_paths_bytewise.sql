-- Object paths compare byte by byte (UTF-8: by code point) on every server, whatever the
-- database's collation: listings are in the same order everywhere, and a folder's objects
-- (every path starting with `folder/`) are one range of the primary key, [`folder/`, `folder0`),
-- which a folder's listing, a WebDAV lookup and a prefix listing read from the index instead of
-- filtering every object of the workspace. Equality is unchanged (every collation here is
-- deterministic); the primary key's index is rebuilt, the table is not rewritten.
ALTER TABLE objects ALTER COLUMN path TYPE text COLLATE "C";

-- The time a mount client gave a file it uploaded (WebDAV `X-OC-Mtime`, decision 0220): what the
-- WebDAV tree reports as the file's modification time, so that a mount's times stay the writer's
-- own across the upload. NULL: the platform wrote it (the API, a restore), and updated_at stands.
ALTER TABLE objects ADD COLUMN modified_at timestamptz(3);

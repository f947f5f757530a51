-- Account safety (SPEC §4.5): disabled users, revoking every session of a user at once,
-- deleting users, and login throttling shared by every backend.

-- A disabled user cannot log in and none of their tokens is accepted.
ALTER TABLE users ADD COLUMN disabled_at timestamptz(3);
-- Tokens issued before this instant are refused (password change or reset, disabling) ...
ALTER TABLE users ADD COLUMN tokens_valid_after timestamptz(3);
-- ... except this one: the session that changed its own password stays logged in.
ALTER TABLE users ADD COLUMN kept_token_jti uuid;
CREATE INDEX users_active_admins ON users (id) WHERE platform_role_id = 'admin' AND disabled_at IS NULL;

-- Failed logins per key ('account:<sha-256 of the email>' or 'address:<client address>'):
-- after a few free failures each further one locks the key for an exponentially growing time.
CREATE TABLE login_throttle (
  key             text PRIMARY KEY,
  failures        integer NOT NULL,
  last_failure_at timestamptz(3) NOT NULL,
  locked_until    timestamptz(3)
);
CREATE INDEX login_throttle_last_failure ON login_throttle (last_failure_at);

-- Deleting a user keeps what they wrote and ran: the references to them become NULL.
ALTER TABLE objects DROP CONSTRAINT objects_updated_by_fkey,
  ADD CONSTRAINT objects_updated_by_fkey FOREIGN KEY (updated_by) REFERENCES users (id) ON DELETE SET NULL;
ALTER TABLE object_versions DROP CONSTRAINT object_versions_created_by_fkey,
  ADD CONSTRAINT object_versions_created_by_fkey FOREIGN KEY (created_by) REFERENCES users (id) ON DELETE SET NULL;
ALTER TABLE trash_items DROP CONSTRAINT trash_items_updated_by_fkey,
  ADD CONSTRAINT trash_items_updated_by_fkey FOREIGN KEY (updated_by) REFERENCES users (id) ON DELETE SET NULL;
ALTER TABLE trash_items DROP CONSTRAINT trash_items_deleted_by_fkey,
  ADD CONSTRAINT trash_items_deleted_by_fkey FOREIGN KEY (deleted_by) REFERENCES users (id) ON DELETE SET NULL;
ALTER TABLE schedules DROP CONSTRAINT schedules_created_by_fkey,
  ADD CONSTRAINT schedules_created_by_fkey FOREIGN KEY (created_by) REFERENCES users (id) ON DELETE SET NULL;
ALTER TABLE runs DROP CONSTRAINT runs_created_by_fkey,
  ADD CONSTRAINT runs_created_by_fkey FOREIGN KEY (created_by) REFERENCES users (id) ON DELETE SET NULL;

-- The client addresses each account logged in from (decision 0255): an address an account knows
-- is not held by the account-wide lock that anyone can trigger, only by its own counts.
CREATE TABLE login_known_addresses (
  account       text NOT NULL,
  address       text NOT NULL,
  last_login_at timestamptz(3) NOT NULL DEFAULT now(),
  PRIMARY KEY (account, address)
);
CREATE INDEX login_known_addresses_last_login ON login_known_addresses (last_login_at);

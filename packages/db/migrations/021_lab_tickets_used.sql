-- Lab tickets already exchanged for a pass (decision 0263): a ticket opens a lab once. Kept until
-- shortly after the ticket itself expires; each exchange removes the expired ones.
CREATE TABLE lab_tickets_used (
  id         text PRIMARY KEY,
  expires_at timestamptz(3) NOT NULL
);
CREATE INDEX lab_tickets_used_expires ON lab_tickets_used (expires_at);

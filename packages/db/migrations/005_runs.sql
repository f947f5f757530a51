-- Notebook runs and schedules (SPEC §4.4, §7).

CREATE TABLE schedules (
  id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  workspace_id  uuid NOT NULL REFERENCES workspaces (id),
  notebook_path text NOT NULL,
  cron          text NOT NULL,
  timezone      text NOT NULL DEFAULT 'UTC',
  enabled       boolean NOT NULL DEFAULT true,
  -- The next due time; a worker that enqueues a run moves it past now(), so ticks missed
  -- while no worker ran collapse into one catch-up run.
  next_run_at   timestamptz(3),
  last_run_at   timestamptz(3),
  created_by    uuid REFERENCES users (id),
  created_at    timestamptz(3) NOT NULL DEFAULT now(),
  updated_at    timestamptz(3) NOT NULL DEFAULT now()
);
CREATE INDEX schedules_due ON schedules (next_run_at) WHERE enabled;
CREATE INDEX schedules_workspace ON schedules (workspace_id, created_at, id);

CREATE TABLE runs (
  id               uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  workspace_id     uuid NOT NULL REFERENCES workspaces (id),
  schedule_id      uuid REFERENCES schedules (id) ON DELETE SET NULL,
  notebook_path    text NOT NULL,
  parameters       jsonb NOT NULL DEFAULT '{}'::jsonb,
  status           text NOT NULL DEFAULT 'queued' CHECK (status IN ('queued', 'running', 'succeeded', 'failed', 'cancelled')),
  error            text,
  log_key          text,
  output_path      text,
  created_by       uuid REFERENCES users (id),
  created_at       timestamptz(3) NOT NULL DEFAULT now(),
  started_at       timestamptz(3),
  finished_at      timestamptz(3),
  -- Claim of a worker: who runs it and until when the claim holds without a heartbeat.
  worker_id        text,
  lease_expires_at timestamptz(3)
);
CREATE INDEX runs_queued ON runs (created_at) WHERE status = 'queued';
CREATE INDEX runs_running_lease ON runs (lease_expires_at) WHERE status = 'running';
CREATE INDEX runs_workspace ON runs (workspace_id, created_at DESC, id DESC);

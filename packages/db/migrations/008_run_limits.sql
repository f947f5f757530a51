-- Run flood limits, fair claiming, cancel, quota and retention (SPEC §4.5; issue 12).

-- Queued runs of one workspace, oldest first: the per-workspace cap counts them, and the
-- fair claim takes each workspace's oldest.
CREATE INDEX runs_queued_workspace ON runs (workspace_id, created_at, id) WHERE status = 'queued';

-- When a workspace was last served (its latest claim): the fair claim serves the workspace
-- served longest ago first.
CREATE INDEX runs_workspace_started ON runs (workspace_id, started_at DESC) WHERE started_at IS NOT NULL;

-- Retention: finished runs by age.
CREATE INDEX runs_finished ON runs (finished_at) WHERE status IN ('succeeded', 'failed', 'cancelled');

-- Retention of old versions by age.
CREATE INDEX object_versions_replaced ON object_versions (replaced_at);

-- Stored bytes of a workspace (quota): sums over these without reading the tables.
CREATE INDEX objects_workspace_size ON objects (workspace_id) INCLUDE (size);
CREATE INDEX object_versions_workspace_size ON object_versions (workspace_id) INCLUDE (size);
CREATE INDEX trash_items_workspace_size ON trash_items (workspace_id) INCLUDE (size);

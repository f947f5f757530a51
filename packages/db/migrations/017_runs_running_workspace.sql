-- Running runs of one workspace: the claim counts them against MAX_RUNNING_RUNS_PER_WORKSPACE
-- (decision 0234) without reading the workspace's finished runs.
CREATE INDEX runs_running_workspace ON runs (workspace_id) WHERE status = 'running';

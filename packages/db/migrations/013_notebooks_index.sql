-- The notebooks of a workspace (objects named `*.ipynb` outside the `.runs/` folders where runs
-- keep their executed copies) as one range of an index of their own: the run and schedule forms
-- list them without reading the workspace's other files (decision 0203). The predicate is the
-- one `WorkspaceFiles.list` writes for `kind=notebook`, word for word, so that the planner can
-- use the index.
CREATE INDEX objects_notebooks ON objects (workspace_id, path) WHERE path LIKE '%.ipynb' AND path NOT LIKE '%.runs/%';

-- Each user's JupyterLab settings and layouts (decision 0252; before, files of the runtime a user
-- was pinned to: decision 0251). A user's settings follow them to any runtime.
CREATE TABLE lab_settings (
  user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  plugin_id text NOT NULL,
  raw text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (user_id, plugin_id)
);

CREATE TABLE lab_layouts (
  user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  name text NOT NULL,
  layout text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (user_id, name)
);

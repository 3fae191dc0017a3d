-- A project's secrets (issue 30): values its setup commands (and, with exposure 'commands', the
-- agent's commands and an engine's shell) get in their environment, never a model. The value is
-- sealed with the service's secret key (secrets/box.ts), as forge tokens are; the API shows the
-- name, the exposure and when it was set, never the value. `name` is an environment variable's
-- name, checked by projects/secrets.ts.
CREATE TABLE project_secrets (
  project_id text NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
  name text NOT NULL,
  sealed_value text NOT NULL,
  exposure text NOT NULL DEFAULT 'setup' CHECK (exposure IN ('setup', 'commands')),
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (project_id, name)
);

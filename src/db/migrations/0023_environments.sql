-- Environments (issue 30): what a project's setup command produced in the checkout, kept as a
-- snapshot on the worker that built it and restored by later turns whose key matches
-- (src/environments/). maintenance_command runs after a restore; environment_key_files are
-- the globs of the files whose content keys a snapshot (null: the common lock files).
ALTER TABLE projects
  ADD COLUMN maintenance_command text,
  ADD COLUMN environment_key_files text[];

-- One row per snapshot a worker keeps: the files live in that worker's data directory, the row
-- is what the admin API lists and what a worker checks before restoring (a deleted row means
-- the snapshot was dropped). `worker` is the worker's name (ERRAND_WORKER_NAME).
CREATE TABLE environments (
  project_id text NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
  key text NOT NULL,
  worker text NOT NULL,
  size_bytes bigint NOT NULL,
  files integer NOT NULL,
  build_ms integer NOT NULL,
  base_commit text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  last_used_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (project_id, key, worker)
);

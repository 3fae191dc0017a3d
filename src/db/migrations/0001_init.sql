-- Projects, API keys, jobs, their turns, the progress log and rate-limit counters.
CREATE TABLE projects (
  id text PRIMARY KEY,
  name text NOT NULL,
  repository text NOT NULL,
  ref text NOT NULL,
  model text,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE api_keys (
  id text PRIMARY KEY,
  -- NULL for an admin key, which works for every project and the admin API.
  project_id text REFERENCES projects (id) ON DELETE CASCADE,
  name text,
  start text NOT NULL,
  hash text NOT NULL UNIQUE,
  created_at timestamptz NOT NULL DEFAULT now(),
  last_used_at timestamptz,
  revoked_at timestamptz
);

CREATE TABLE jobs (
  id text PRIMARY KEY,
  project_id text NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
  status text NOT NULL CHECK (status IN ('active', 'completed', 'failed', 'archived')),
  repository text NOT NULL,
  ref text NOT NULL,
  branch text NOT NULL,
  model text NOT NULL,
  pr_link text,
  pr_number integer,
  error text,
  turn_count integer NOT NULL DEFAULT 0,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  archived_at timestamptz
);
CREATE INDEX jobs_project_created ON jobs (project_id, created_at DESC, id DESC);

CREATE TABLE turns (
  job_id text NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
  seq integer NOT NULL,
  prompt text NOT NULL,
  state text NOT NULL CHECK (state IN ('queued', 'running', 'done', 'failed', 'cancelled')),
  queue_id text,
  attempts integer NOT NULL DEFAULT 0,
  summary text,
  error text,
  usage jsonb,
  created_at timestamptz NOT NULL DEFAULT now(),
  started_at timestamptz,
  finished_at timestamptz,
  PRIMARY KEY (job_id, seq)
);
CREATE INDEX turns_open ON turns (state) WHERE state IN ('queued', 'running');

CREATE TABLE events (
  seq bigserial PRIMARY KEY,
  job_id text NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
  turn integer,
  type text NOT NULL,
  data jsonb NOT NULL DEFAULT '{}'::jsonb,
  at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX events_job_seq ON events (job_id, seq);

CREATE TABLE rate_limits (
  project_id text NOT NULL,
  operation text NOT NULL,
  window_start timestamptz NOT NULL,
  count integer NOT NULL,
  PRIMARY KEY (project_id, operation, window_start)
);

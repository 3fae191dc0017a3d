-- Schedules (issue 34): a project's recurring prompts. Each firing creates a job through the
-- job core's createJob (the project's rate limit and budget apply). pg-boss's scheduler sends one
-- queue entry per occurrence across every process (src/queue/schedules.ts); a firing is claimed
-- here by its queue entry's id, so a redelivered entry never makes a second job.
CREATE TABLE schedules (
  id text PRIMARY KEY,
  project_id text NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
  name text NOT NULL,
  cron text NOT NULL,
  timezone text NOT NULL DEFAULT 'UTC',
  prompt text NOT NULL,
  -- The mode of the jobs it creates (issue 34's modes); stored here, given to createJob when
  -- it takes one.
  mode text NOT NULL DEFAULT 'code' CHECK (mode IN ('code', 'ask', 'plan')),
  -- null: the project's model at each firing.
  model text,
  paused boolean NOT NULL DEFAULT false,
  -- Who made it (an Actor, src/records/actor.ts).
  created_by jsonb,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  -- The last firing: when, the job it made, or why none was made (a refusal's message).
  last_fired_at timestamptz,
  last_job_id text,
  last_error text
);

CREATE INDEX schedules_project ON schedules (project_id, created_at, id);

-- One row per firing, claimed by the queue entry that carried it: the unique entry id is what
-- keeps a redelivered entry from creating a second job.
CREATE TABLE schedule_firings (
  entry_id text PRIMARY KEY,
  schedule_id text NOT NULL REFERENCES schedules (id) ON DELETE CASCADE,
  fired_at timestamptz NOT NULL DEFAULT now(),
  job_id text,
  error text
);

CREATE INDEX schedule_firings_schedule ON schedule_firings (schedule_id, fired_at DESC);

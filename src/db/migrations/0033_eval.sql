-- Measuring agents on the project's own code (issue 35, docs/eval.md): best-of-N attempts per
-- job judged by a check command, and eval runs whose tasks are jobs. Each part is additive: a
-- job created without attempts leaves these columns null.

-- The command that judges a turn's attempts (run in the sandbox, with the project's
-- environment, on each attempt's finished checkout; exit 0 passes): the project's, and the one
-- a job's create gave instead of it.
ALTER TABLE projects ADD COLUMN check_command text;
ALTER TABLE jobs ADD COLUMN check_command text;

-- The attempts a turn was asked to make ({"count", "agents": [{"engine", "model"}]}); null: one,
-- the usual way. `attempts` (a number) is already the turn's tries by the queue.
ALTER TABLE turns ADD COLUMN best_of jsonb;

-- What the job's last best-of-N turn's attempts did (agent, outcome, check, cost, branch, the
-- winner), written with the turn's end; null: the job never made attempts.
ALTER TABLE jobs ADD COLUMN attempts jsonb;

-- An eval run: a suite's tasks times its agents times its repeats, each a job of the run.
CREATE TABLE eval_runs (
  id text PRIMARY KEY,
  name text NOT NULL,
  -- The suite as accepted (tasks, agents, repeat, concurrency), after its defaults.
  suite jsonb NOT NULL,
  state text NOT NULL DEFAULT 'running' CHECK (state IN ('running', 'finished', 'cancelled')),
  created_by jsonb,
  created_at timestamptz NOT NULL DEFAULT now(),
  finished_at timestamptz
);

-- A run's job for one task, agent and repeat, and what its check said.
CREATE TABLE eval_results (
  run_id text NOT NULL REFERENCES eval_runs (id) ON DELETE CASCADE,
  -- Its place in the run (task, then agent, then repeat, as the suite lists them): results are
  -- started and shown in this order.
  n integer NOT NULL,
  task text NOT NULL,
  -- The agent as the suite names it: engine/model.
  agent text NOT NULL,
  repeat smallint NOT NULL CHECK (repeat >= 1),
  project_id text NOT NULL,
  job_id text,
  state text NOT NULL DEFAULT 'pending'
    CHECK (state IN ('pending', 'running', 'passed', 'failed', 'error', 'cancelled')),
  check_exit integer,
  -- The last lines of the check's output (a failure's), or of the job's error; scrubbed.
  tail text,
  cost_usd double precision,
  duration_ms integer,
  steps integer,
  input_tokens bigint,
  output_tokens bigint,
  started_at timestamptz,
  finished_at timestamptz,
  PRIMARY KEY (run_id, task, agent, repeat)
);
CREATE INDEX eval_results_pending ON eval_results (run_id) WHERE state IN ('pending', 'running');

-- A run's jobs are tagged: they do not mix with the project's own work in its lists.
ALTER TABLE jobs ADD COLUMN eval_run_id text REFERENCES eval_runs (id) ON DELETE SET NULL;
CREATE INDEX jobs_eval_run ON jobs (eval_run_id) WHERE eval_run_id IS NOT NULL;

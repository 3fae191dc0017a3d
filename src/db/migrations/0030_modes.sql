-- Modes (issue 34): a turn is `code` (change the repository, commit, push, open the pull
-- request: what every turn did before), `ask` (read-only: its answer is its summary) or `plan`
-- (read-only: its plan is its summary, and the job waits for approval).
ALTER TABLE turns ADD COLUMN mode text NOT NULL DEFAULT 'code'
  CHECK (mode IN ('code', 'ask', 'plan'));

-- The job's record says the mode of its last turn, the summary of its last finished turn, and
-- whether it waits for a plan's approval; the job core keeps them with the turns.
ALTER TABLE jobs
  ADD COLUMN mode text NOT NULL DEFAULT 'code' CHECK (mode IN ('code', 'ask', 'plan')),
  ADD COLUMN summary text,
  ADD COLUMN awaiting_approval boolean NOT NULL DEFAULT false;

UPDATE jobs SET summary = (
  SELECT t.summary FROM turns t
  WHERE t.job_id = jobs.id AND t.state = 'done'
  ORDER BY t.seq DESC LIMIT 1);

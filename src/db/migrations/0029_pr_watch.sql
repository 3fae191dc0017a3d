-- The pull request watch (issue 33): once a turn opened a job's pull request, Errand follows it
-- on the forge, turns its failing checks into follow-up turns, resolves its conflicts with the
-- base in a turn, and merges it when the project allows (src/features/pr-watch/).

-- The project's settings of the watch.
ALTER TABLE projects
  -- How many turns in a row may try to fix one pull request's failing checks; 0: none.
  ADD COLUMN autofix_attempts integer NOT NULL DEFAULT 2
    CHECK (autofix_attempts BETWEEN 0 AND 10),
  -- Globs of the check names the watch acts on; null: every check.
  ADD COLUMN autofix_checks text[],
  ADD COLUMN auto_merge text NOT NULL DEFAULT 'off'
    CHECK (auto_merge IN ('off', 'green', 'green-and-approved')),
  ADD COLUMN merge_method text NOT NULL DEFAULT 'merge'
    CHECK (merge_method IN ('merge', 'squash', 'rebase')),
  -- How a turn brings a conflicting pull request up to its base.
  ADD COLUMN conflict_strategy text NOT NULL DEFAULT 'merge'
    CHECK (conflict_strategy IN ('merge', 'rebase'));

-- What the forge last said of the job's pull request (a PrRecord, src/records/pr.ts): what
-- GET of a job answers without calling the forge. null until the watch first looked.
ALTER TABLE jobs ADD COLUMN pr jsonb;

-- Why a turn was queued by Errand itself rather than asked for: `autofix` (the pull request's
-- checks failed), `conflict` (the pull request no longer merges into its base). null: asked.
ALTER TABLE turns ADD COLUMN purpose text CHECK (purpose IN ('autofix', 'conflict'));

-- One row per job whose pull request the watch follows: its counters, what it did for which
-- head commit (each once), and when it looks next. A process takes a due row for a while
-- (claimed_until) so that one job's pull request is looked at by one process at a time.
CREATE TABLE pr_watches (
  job_id text PRIMARY KEY REFERENCES jobs (id) ON DELETE CASCADE,
  -- watching: acts; paused: looks and records only (gave up, or left alone); ended: the pull
  -- request was merged or closed, or the job archived.
  state text NOT NULL DEFAULT 'watching' CHECK (state IN ('watching', 'paused', 'ended')),
  reason text,
  -- Autofix turns queued in a row; a green run sets it back to 0.
  autofixes integer NOT NULL DEFAULT 0,
  -- The head commits the watch acted on: each act is done once per head.
  failed_sha text,
  -- A head the forge said does not merge, once: acted on when it says so again (Gitea says so
  -- for a few seconds after every push, while it checks).
  unmergeable_sha text,
  conflict_sha text,
  merge_sha text,
  next_at timestamptz NOT NULL DEFAULT now(),
  nudged_at timestamptz NOT NULL DEFAULT now(),
  claimed_at timestamptz,
  claimed_until timestamptz,
  observed_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX pr_watches_due ON pr_watches (next_at) WHERE state <> 'ended';

-- Turns asked for on a forge (issue 22). `turns.trigger` is the forge event that asked for a
-- turn (a TurnTrigger of src/db/schema.ts: the forge, its delivery id, the comment's URL and
-- author, and where Errand answers), written with the turn: the answer at the turn's end
-- survives a restart between the two. Its delivery id makes a queue entry delivered twice
-- accept its turn once.
ALTER TABLE turns ADD COLUMN trigger jsonb;
CREATE INDEX turns_trigger_delivery ON turns ((trigger->>'delivery')) WHERE trigger IS NOT NULL;

-- What Errand has said on the forge about a turn: `accepted` (the job's link on the issue it
-- came from) and `ended` (the answer in the comment's thread). A row is written before the
-- forge is called, so two workers never both answer; a failed call removes it to try again.
CREATE TABLE forge_replies (
  job_id text NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
  seq integer NOT NULL,
  kind text NOT NULL CHECK (kind IN ('accepted', 'ended')),
  at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (job_id, seq, kind)
);

-- The threads (an issue, a pull request) where Errand told someone without write access that
-- it cannot act for them: once per thread, however often they ask.
CREATE TABLE forge_refusals (
  project_id text NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
  thread text NOT NULL,
  at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (project_id, thread)
);

-- The open job of an issue, for a second mention on it.
CREATE INDEX jobs_origin ON jobs (project_id, ((origin->>'number')::integer))
  WHERE origin IS NOT NULL;

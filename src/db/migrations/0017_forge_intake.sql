-- Forge events are taken once by what the forge signed, and each one's fate is kept (issue 29).
-- A delivery's id is a header no signature covers: one signed body sent again under new ids was
-- taken each time. `forge_events` replaces `forge_deliveries`: one row per event a delivery
-- means, keyed by the event's signed identity (`key`: the comment's, the review's or the note's
-- id; an issue, its label and the issue's time of change), written in the transaction that
-- queues the event. A delivery of an event already recorded is acknowledged and counted in
-- `repeats`, not queued. The worker writes what became of it (`outcome`, `reason`, the turn it
-- started), which the dashboard shows. Kept 30 days.
DROP TABLE forge_deliveries;

CREATE TABLE forge_events (
  project_id text NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
  key text NOT NULL,
  -- The delivery that brought it first, and the last one that brought it again.
  delivery_id text NOT NULL,
  last_delivery_id text,
  forge text NOT NULL CHECK (forge IN ('github', 'gitlab', 'gitea')),
  -- `comment`, `line comment`, `review` or `label`.
  kind text NOT NULL,
  thread_kind text NOT NULL CHECK (thread_kind IN ('issue', 'pull-request')),
  thread_number integer NOT NULL,
  -- The forge login of who wrote the comment or added the label, and the page of the comment
  -- (the issue's for a label), as the signed payload gives them.
  author text NOT NULL,
  url text NOT NULL,
  received_at timestamptz NOT NULL DEFAULT now(),
  repeats integer NOT NULL DEFAULT 0,
  outcome text NOT NULL DEFAULT 'queued'
    CHECK (outcome IN ('queued', 'accepted', 'ignored', 'refused', 'failed')),
  reason text,
  job_id text REFERENCES jobs (id) ON DELETE SET NULL,
  turn integer,
  decided_at timestamptz,
  PRIMARY KEY (project_id, key)
);
CREATE INDEX forge_events_recent ON forge_events (project_id, received_at DESC);
CREATE INDEX forge_events_received ON forge_events (received_at);

-- A turn's trigger names its event's key too: an event whose record is gone (older than the
-- record's 30 days) and comes again finds the turn it started and starts no other.
CREATE INDEX turns_trigger_event ON turns ((trigger->>'event')) WHERE trigger IS NOT NULL;
-- Found by its event's key now; the delivery id stays in the trigger, to be shown.
DROP INDEX turns_trigger_delivery;

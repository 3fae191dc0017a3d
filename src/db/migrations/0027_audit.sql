-- Who did it, and the audit log (issue 32). A job's creator and each turn's sender are an
-- actor (src/records/actor.ts) as JSON: a user, an API key, or a forge user through the forge
-- webhook; null for the jobs and turns made before this migration.
ALTER TABLE jobs ADD COLUMN created_by jsonb;
ALTER TABLE turns ADD COLUMN sent_by jsonb;

-- The one text a filter by actor compares (`createdBy=`, `actor=`): a user's or a key's id,
-- or `<forge>:<login>` for a forge user. Immutable, so indexes can hold it.
CREATE FUNCTION actor_ref(actor jsonb) RETURNS text
  LANGUAGE sql IMMUTABLE PARALLEL SAFE
  AS $$ SELECT coalesce(actor ->> 'id', (actor ->> 'forge') || ':' || (actor ->> 'login')) $$;

CREATE INDEX jobs_created_by ON jobs (project_id, actor_ref(created_by), created_at DESC, id DESC)
  WHERE created_by IS NOT NULL;

-- One row per change of state, or refused attempt at one, written by src/audit/audit.ts in the
-- transaction of the change. Append-only: the trigger below refuses updates and deletes.
CREATE TABLE audit_log (
  seq bigserial PRIMARY KEY,
  at timestamptz NOT NULL DEFAULT now(),
  -- null for a refusal of a request no one could be told apart in (no or an unknown key).
  actor jsonb,
  -- The request's address as the HTTP server saw it; null for what no request made.
  address text,
  action text NOT NULL,
  target_kind text,
  target_id text,
  outcome text NOT NULL CHECK (outcome IN ('success', 'refused')),
  -- The API's error code of a refusal.
  error_code text,
  request_id text,
  -- Never a secret: names, ids and counts only (src/audit/audit.ts).
  details jsonb NOT NULL DEFAULT '{}',
  CHECK ((outcome = 'refused') = (error_code IS NOT NULL))
);
CREATE INDEX audit_log_actor ON audit_log (actor_ref(actor), seq DESC);
CREATE INDEX audit_log_action ON audit_log (action, seq DESC);
CREATE INDEX audit_log_target ON audit_log (target_id, seq DESC);
CREATE INDEX audit_log_at ON audit_log (at);

CREATE FUNCTION audit_log_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'the audit log is append-only';
END $$;
CREATE TRIGGER audit_log_append_only BEFORE UPDATE OR DELETE ON audit_log
  FOR EACH ROW EXECUTE FUNCTION audit_log_append_only();

-- Idempotency keys of job creates and follow-ups (the Idempotency-Key header): the response a
-- key's first request got, kept for 24 hours so that a retry gets it again instead of making a
-- second job. A row is written in the transaction of the change it answers, so it exists
-- exactly when that change committed; the body is the JSON text as sent, byte for byte.
CREATE TABLE idempotency_keys (
  project_id text NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
  key text NOT NULL,
  -- SHA-256 (hex) of the method, the path and the canonical JSON body of the first request.
  fingerprint text NOT NULL,
  status integer NOT NULL,
  body text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (project_id, key)
);
-- For the purge of expired keys.
CREATE INDEX idempotency_keys_created ON idempotency_keys (created_at);

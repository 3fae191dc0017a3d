-- Dashboard sessions: a signed-in browser holds a random id in a cookie; only its SHA-256 hash
-- is stored, with the key it was exchanged for, so revoking the key ends its sessions and a
-- leaked database holds nothing a browser could present. Kept in the database, not in memory,
-- so any API process can serve any session.
CREATE TABLE dashboard_sessions (
  hash text PRIMARY KEY,
  key_id text NOT NULL REFERENCES api_keys (id) ON DELETE CASCADE,
  created_at timestamptz NOT NULL DEFAULT now(),
  last_seen_at timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz NOT NULL
);
CREATE INDEX dashboard_sessions_key_id ON dashboard_sessions (key_id);

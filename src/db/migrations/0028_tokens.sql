-- Personal API tokens (issue 32): a user makes tokens of their own that act on the API with the
-- user's roles, clamped to `project_ids` (when not null) and to `viewer` when read-only. Only the
-- token's SHA-256 hash is kept. A token stops when revoked, expired or its user deactivated:
-- every check reads all three.
CREATE TABLE user_tokens (
  id text PRIMARY KEY,
  user_id text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  name text NOT NULL,
  -- The first characters of the token, to tell tokens apart in a listing.
  start text NOT NULL,
  hash text NOT NULL UNIQUE,
  -- null: every project the user has a role on.
  project_ids text[],
  read_only boolean NOT NULL DEFAULT false,
  created_at timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz NOT NULL,
  last_used_at timestamptz,
  revoked_at timestamptz
);
CREATE INDEX user_tokens_user_id ON user_tokens (user_id);

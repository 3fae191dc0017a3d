-- People (issue 32): a user is made at their first sign-in through the OpenID provider, keyed by
-- the issuer and the provider's subject (an email can change; the subject cannot). `groups` is
-- the provider's groups claim as of the last sign-in. A deactivated user's sessions and tokens
-- stop at once: every check reads deactivated_at.
CREATE TABLE users (
  id text PRIMARY KEY,
  issuer text NOT NULL,
  subject text NOT NULL,
  email text,
  name text,
  groups text[] NOT NULL DEFAULT '{}',
  -- A server admin: from ERRAND_OIDC_ADMIN_GROUPS or ERRAND_ADMIN_EMAILS at the last sign-in.
  admin boolean NOT NULL DEFAULT false,
  created_at timestamptz NOT NULL DEFAULT now(),
  last_seen_at timestamptz,
  deactivated_at timestamptz,
  UNIQUE (issuer, subject)
);

-- A role on a project, given to a user or to a group of the provider's groups claim. A user's
-- role on a project is the strongest of their own and their groups'.
CREATE TABLE project_roles (
  project_id text NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
  grantee_kind text NOT NULL CHECK (grantee_kind IN ('user', 'group')),
  -- A user's id (users.id) or a group's name.
  grantee text NOT NULL,
  role text NOT NULL CHECK (role IN ('maintainer', 'member', 'viewer')),
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (project_id, grantee_kind, grantee)
);
CREATE INDEX project_roles_grantee ON project_roles (grantee_kind, grantee);

-- A dashboard session is a key's (as before) or a user's.
ALTER TABLE dashboard_sessions
  ALTER COLUMN key_id DROP NOT NULL,
  ADD COLUMN user_id text REFERENCES users (id) ON DELETE CASCADE,
  ADD CONSTRAINT dashboard_sessions_one_principal CHECK ((key_id IS NULL) <> (user_id IS NULL));
CREATE INDEX dashboard_sessions_user_id ON dashboard_sessions (user_id);

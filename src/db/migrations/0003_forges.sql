-- Where a project's pull requests go: the forge kind and API URL (NULL: inferred from the
-- repository URL), and its credentials, either the name of a worker environment variable or
-- an encrypted blob (AES-256-GCM, key from ERRAND_SECRET_KEY). The review diff of plain git
-- projects is kept with the job so the review page needs no checkout.
ALTER TABLE projects ADD COLUMN forge_kind text CHECK (forge_kind IN ('github', 'gitlab', 'gitea', 'git'));
ALTER TABLE projects ADD COLUMN forge_api_url text;
ALTER TABLE projects ADD COLUMN forge_token_env text;
ALTER TABLE projects ADD COLUMN forge_secret text;
ALTER TABLE projects ADD COLUMN draft_pull_requests boolean NOT NULL DEFAULT true;
ALTER TABLE jobs ADD COLUMN review_diff text;
ALTER TABLE jobs ADD COLUMN review_diff_truncated boolean NOT NULL DEFAULT false;

-- The agent's reach (issue 34): structured output, images, MCP servers. Each is additive: a
-- request that sends none of them leaves these columns null and the attachments table empty.

-- Structured output (docs/structured-output.md): the JSON Schema a turn's answer must satisfy,
-- and the value the turn produced; the job keeps the value of its last finished turn.
ALTER TABLE turns
  ADD COLUMN output_schema jsonb,
  ADD COLUMN output jsonb;
ALTER TABLE jobs ADD COLUMN output jsonb;

-- Images (docs/images.md): up to five per turn, kept with the job, counted in its size; the
-- bytes as received (or fetched), their type as their first bytes say, never as a client said.
CREATE TABLE attachments (
  job_id text NOT NULL,
  seq integer NOT NULL,
  n smallint NOT NULL CHECK (n BETWEEN 1 AND 5),
  media_type text NOT NULL
    CHECK (media_type IN ('image/png', 'image/jpeg', 'image/webp', 'image/gif')),
  size integer NOT NULL CHECK (size > 0),
  data bytea NOT NULL,
  -- The https URL the service fetched it from; null for one sent inline.
  source text,
  PRIMARY KEY (job_id, seq, n),
  FOREIGN KEY (job_id, seq) REFERENCES turns (job_id, seq) ON DELETE CASCADE
);

-- MCP servers (docs/mcp-servers.md): the project's, and those one job's create adds (name ->
-- server, values naming project secrets as ${secret:NAME}, opened only when a turn runs).
ALTER TABLE projects ADD COLUMN mcp_servers jsonb;
ALTER TABLE jobs ADD COLUMN mcp_servers jsonb;

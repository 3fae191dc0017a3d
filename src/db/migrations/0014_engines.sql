-- The agent a project's jobs run (issue 23): Errand's own loop, or one of the coding CLIs that
-- `errand engine install` puts in the data directory (src/engines/catalog.ts names them).
ALTER TABLE projects ADD COLUMN engine text NOT NULL DEFAULT 'errand'
  CONSTRAINT projects_engine_check CHECK (engine IN ('errand', 'claude-code', 'codex', 'opencode'));

-- What model calls cost (issue 21). Each turn's `usage` is the Usage of src/jobs/usage.ts:
-- tokens by kind and costUsd (null when a price of the model is unknown). A job's `usage` is the
-- sum over its turns, kept on its row by the transitions that record a turn's usage, so that
-- reading a job stays one row. `project_spend` is each project's sum per calendar month (UTC),
-- for the monthly budget and the dashboard: a create reads one row of it, not the month's turns.
-- Budgets are US dollars; NULL is none.
ALTER TABLE projects ADD COLUMN job_budget_usd double precision
  CHECK (job_budget_usd > 0 AND job_budget_usd <= 1000000000);
ALTER TABLE projects ADD COLUMN monthly_budget_usd double precision
  CHECK (monthly_budget_usd > 0 AND monthly_budget_usd <= 1000000000);

-- Turns recorded before costs were: their tokens, no cache counts, and a cost never known.
UPDATE turns SET usage = jsonb_build_object(
    'inputTokens', COALESCE((usage->>'inputTokens')::bigint, 0),
    'outputTokens', COALESCE((usage->>'outputTokens')::bigint, 0),
    'cacheReadTokens', 0,
    'cacheWriteTokens', 0,
    'costUsd', NULL)
  WHERE usage IS NOT NULL AND jsonb_typeof(usage) = 'object' AND NOT usage ? 'costUsd';
UPDATE turns SET usage = NULL WHERE usage IS NOT NULL AND jsonb_typeof(usage) <> 'object';

ALTER TABLE jobs ADD COLUMN usage jsonb NOT NULL DEFAULT
  '{"inputTokens":0,"outputTokens":0,"cacheReadTokens":0,"cacheWriteTokens":0,"costUsd":0}';

CREATE TABLE project_spend (
  project_id text NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
  -- The first day of the calendar month, in UTC.
  month date NOT NULL,
  input_tokens bigint NOT NULL DEFAULT 0,
  output_tokens bigint NOT NULL DEFAULT 0,
  cache_read_tokens bigint NOT NULL DEFAULT 0,
  cache_write_tokens bigint NOT NULL DEFAULT 0,
  -- The known part: usage whose cost was unknown adds its tokens and counts in `unpriced`.
  cost_usd double precision NOT NULL DEFAULT 0,
  unpriced integer NOT NULL DEFAULT 0,
  PRIMARY KEY (project_id, month)
);

-- The sums of what was recorded before (src/jobs/spend.ts rebuildSpend says the same after an
-- import). A turn's month is the one it ended in.
UPDATE jobs j SET usage = s.usage
  FROM (
    SELECT job_id, jsonb_build_object(
        'inputTokens', sum((usage->>'inputTokens')::bigint),
        'outputTokens', sum((usage->>'outputTokens')::bigint),
        'cacheReadTokens', sum((usage->>'cacheReadTokens')::bigint),
        'cacheWriteTokens', sum((usage->>'cacheWriteTokens')::bigint),
        'costUsd', CASE WHEN bool_and(jsonb_typeof(usage->'costUsd') = 'number')
          THEN sum((usage->>'costUsd')::double precision) END) AS usage
    FROM turns WHERE usage IS NOT NULL GROUP BY job_id
  ) s
  WHERE j.id = s.job_id;
INSERT INTO project_spend (project_id, month, input_tokens, output_tokens, cache_read_tokens,
    cache_write_tokens, cost_usd, unpriced)
  SELECT j.project_id,
    date_trunc('month', COALESCE(t.finished_at, t.started_at, t.created_at) AT TIME ZONE 'UTC')::date,
    sum((t.usage->>'inputTokens')::bigint),
    sum((t.usage->>'outputTokens')::bigint),
    sum((t.usage->>'cacheReadTokens')::bigint),
    sum((t.usage->>'cacheWriteTokens')::bigint),
    COALESCE(sum((t.usage->>'costUsd')::double precision), 0),
    count(*) FILTER (WHERE jsonb_typeof(t.usage->'costUsd') IS DISTINCT FROM 'number')
  FROM turns t JOIN jobs j ON j.id = t.job_id
  WHERE t.usage IS NOT NULL
  GROUP BY 1, 2;

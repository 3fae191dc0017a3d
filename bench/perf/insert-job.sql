-- The database bound of POST job: one transaction inserting a job row and its first turn with
-- the columns the service writes (src/jobs/service.ts createJob, src/jobs/lifecycle.ts
-- acceptTurn). Run by bench/perf/run.ts as
--   pgbench -n -f insert-job.sql -D project=… -D repository=… -D ref=… -D model=… -c 32 -j 2 -T …
-- ids: 'job_' and 20 digits (valid ids; a collision among 9e15 is not expected in a run).
\set n random(1, 9000000000000000)
BEGIN;
INSERT INTO jobs (id, project_id, status, repository, ref, branch, model, pr_link, pr_number, error, turn_count, archived_at) VALUES ('job_' || lpad(:n::text, 20, '0'), ':project', 'active', ':repository', ':ref', 'errand/job_' || lpad(:n::text, 20, '0'), ':model', NULL, NULL, NULL, 1, NULL);
INSERT INTO turns (job_id, seq, prompt, state, queue_id, summary, error, usage, started_at, finished_at) VALUES ('job_' || lpad(:n::text, 20, '0'), 1, 'benchmark job: say hello', 'queued', gen_random_uuid()::text, NULL, NULL, NULL, NULL, NULL);
COMMIT;

-- The review page's capability (issue 29): a random token kept with each job, in the review link
-- Errand gives as the `prLink` of a job on a plain git remote (`…/review/{jobId}?token=…`). That
-- link opens the page without a key until the job is archived; the job id alone (posted in forge
-- comments) opens nothing without a signed-in dashboard session. 64 hex digits: two random
-- UUIDs, 244 bits from PostgreSQL's strong random source. Every existing job gets its own.
ALTER TABLE jobs ADD COLUMN review_token text NOT NULL
  DEFAULT replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', '');

-- The review links already handed out as `prLink` carry the token from now on, so a client that
-- reads the job again gets a link that works; the bare link it had before asks for a sign-in.
-- A pull request's URL (a job on a forge: pr_number is set) is left as it is.
UPDATE jobs SET pr_link = pr_link || '?token=' || review_token
  WHERE pr_number IS NULL
    AND right(pr_link, char_length('/review/' || id)) = '/review/' || id;

-- The forge as a client of Errand (issue 22). A project's forge signs its webhook deliveries
-- with `forge_webhook_secret` (sealed with ERRAND_SECRET_KEY, as forge_secret is; NULL: the
-- endpoint refuses every delivery). `forge_handle` is the name a comment mentions (`@errand`,
-- stored without the @) and `forge_label` the label that makes an issue a job.
ALTER TABLE projects ADD COLUMN forge_webhook_secret text;
ALTER TABLE projects ADD COLUMN forge_handle text NOT NULL DEFAULT 'errand'
  CHECK (forge_handle ~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$');
ALTER TABLE projects ADD COLUMN forge_label text NOT NULL DEFAULT 'errand'
  CHECK (char_length(forge_label) BETWEEN 1 AND 100 AND forge_label = btrim(forge_label));

-- The deliveries a project's forge made, by the forge's delivery id, written in the
-- transaction that queues the delivery's event: a redelivery finds its row and is acknowledged
-- without being queued again. Kept for a week (forges redeliver within days), then purged.
CREATE TABLE forge_deliveries (
  project_id text NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
  delivery_id text NOT NULL,
  received_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (project_id, delivery_id)
);
CREATE INDEX forge_deliveries_received ON forge_deliveries (received_at);

-- The forge issue a job came from ({ forge, number, url, title }); NULL for jobs made otherwise.
ALTER TABLE jobs ADD COLUMN origin jsonb;

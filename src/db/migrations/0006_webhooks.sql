-- Webhook endpoints of a project and the deliveries of a job's events to them. A delivery is
-- written, with its queue entry, in the transaction that records its event: it exists exactly
-- when the event committed. Signing secrets are stored sealed (ERRAND_SECRET_KEY); while a
-- rotated secret's overlap lasts, the previous one signs too.
CREATE TABLE webhooks (
  id text PRIMARY KEY,
  project_id text NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
  url text NOT NULL,
  events text[] NOT NULL,
  description text,
  enabled boolean NOT NULL DEFAULT true,
  secret text NOT NULL,
  previous_secret text,
  previous_secret_expires_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhooks_project ON webhooks (project_id, created_at);

CREATE TABLE webhook_deliveries (
  -- The webhook-id header: the same on every attempt, so a receiver can drop a repeat.
  id text PRIMARY KEY,
  webhook_id text NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
  job_id text NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
  event_seq bigint NOT NULL,
  type text NOT NULL,
  payload jsonb NOT NULL,
  state text NOT NULL CHECK (state IN ('pending', 'delivered', 'failed')),
  attempts integer NOT NULL DEFAULT 0,
  created_at timestamptz NOT NULL DEFAULT now(),
  delivered_at timestamptz,
  failed_at timestamptz
);
CREATE INDEX webhook_deliveries_webhook ON webhook_deliveries (webhook_id, created_at DESC, id DESC);
CREATE INDEX webhook_deliveries_job ON webhook_deliveries (job_id);

CREATE TABLE webhook_attempts (
  delivery_id text NOT NULL REFERENCES webhook_deliveries (id) ON DELETE CASCADE,
  attempt integer NOT NULL,
  at timestamptz NOT NULL DEFAULT now(),
  -- The receiver's HTTP status; null when no answer came (refused, timed out, unsafe address).
  status integer,
  error text,
  latency_ms integer NOT NULL,
  PRIMARY KEY (delivery_id, attempt)
);

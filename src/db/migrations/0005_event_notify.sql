-- Every event written to a job's log is announced on the channel errand_events with the job's
-- id as payload. PostgreSQL delivers a notification only when the writing transaction commits,
-- so a listener (the live stream, in every API process) never hears of an event it cannot read
-- yet, and hears of it from whichever process wrote it.
CREATE FUNCTION errand_notify_event() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('errand_events', NEW.job_id);
  RETURN NULL;
END
$$;

CREATE TRIGGER events_notify AFTER INSERT ON events
  FOR EACH ROW EXECUTE FUNCTION errand_notify_event();

-- A statement that makes several writes at once (a job's create: the job, its turn, its event
-- and its queue entry) calls this when one of its checks fails, such as a used-up rate limit: the
-- statement fails, so none of its writes is kept, with SQLSTATE ER001 and the reason as the
-- message, which the service recognises (src/jobs/lifecycle.ts). VOLATILE, so that it runs only
-- when the check that calls it fails, never while the statement is planned.
CREATE FUNCTION errand_refuse(reason text) RETURNS boolean VOLATILE LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION USING ERRCODE = 'ER001', MESSAGE = reason;
END
$$;

-- errand_refuse (0010) served a job's create written as one statement; creates now write in a
-- transaction of ordinary statements, so nothing calls it.
DROP FUNCTION IF EXISTS errand_refuse(text);

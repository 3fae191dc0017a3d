-- How much one command (or an engine's run) may grow a job's checkout, in MB: a project limit
-- like the others of 0008, NULL for the sandbox's default (DEFAULT_LIMITS.diskMb, 4096).
ALTER TABLE projects ADD COLUMN command_disk_mb integer;

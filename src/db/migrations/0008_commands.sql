-- Whether the agent may run the repository's commands (the run_command tool, in the sandbox of
-- src/sandbox/), the command a new workspace is set up with, and the limits each command runs
-- under. A NULL limit means the sandbox's default (DEFAULT_LIMITS), so that default lives in one
-- place and a project follows it until an admin sets its own.
ALTER TABLE projects ADD COLUMN commands_enabled boolean NOT NULL DEFAULT true;
ALTER TABLE projects ADD COLUMN setup_command text CHECK (char_length(setup_command) <= 2000);
ALTER TABLE projects ADD COLUMN setup_network boolean NOT NULL DEFAULT false;
ALTER TABLE projects ADD COLUMN command_timeout_seconds integer;
ALTER TABLE projects ADD COLUMN command_cpu_seconds integer;
ALTER TABLE projects ADD COLUMN command_memory_mb integer;
ALTER TABLE projects ADD COLUMN command_processes integer;
ALTER TABLE projects ADD COLUMN command_file_size_mb integer;

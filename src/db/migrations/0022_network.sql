-- A project's network policy (issue 30), replacing the on/off setup_network of 0008: what its
-- setup command may reach (none, allowlist: only the hosts of network_allow through Errand's egress
-- proxy, open: the user-mode network with its filter of non-public addresses), what its commands
-- may reach (the agent's run_command and an engine's whole sandbox: none or allowlist), and the
-- allowlist's patterns as given (presets are expanded when a run starts, so a preset's hosts can
-- change with Errand). A project that had setup_network keeps an open setup network.
ALTER TABLE projects
  ADD COLUMN network_setup text NOT NULL DEFAULT 'none'
    CHECK (network_setup IN ('none', 'allowlist', 'open')),
  ADD COLUMN network_commands text NOT NULL DEFAULT 'none'
    CHECK (network_commands IN ('none', 'allowlist')),
  ADD COLUMN network_allow text[] NOT NULL DEFAULT '{}';

UPDATE projects SET network_setup = 'open' WHERE setup_network;

ALTER TABLE projects DROP COLUMN setup_network;

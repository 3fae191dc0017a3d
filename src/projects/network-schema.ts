// The network policy as the admin API and the dashboard's forms take and show it: its shape, each
// refusal naming its field, and each pattern of the allowlist checked by the rules the egress
// proxy applies (network.ts), so that a bad one is a 400 naming it, never a run that fails later.
import { z } from 'zod';
import {
  ALLOW_MAX_PATTERNS,
  COMMANDS_NETWORK_MODES,
  NETWORK_PRESETS,
  parsePattern,
  SETUP_NETWORK_MODES,
} from './network.ts';

const SETUP = `"network.setup" must be one of ${SETUP_NETWORK_MODES.join(', ')}`;
const COMMANDS = `"network.commands" must be one of ${COMMANDS_NETWORK_MODES.join(', ')}`;
const ALLOW = `"network.allow" must be a list of at most ${ALLOW_MAX_PATTERNS} patterns (strings)`;
const NETWORK = '"network" must be an object of "setup", "commands" and "allow", each optional';

const SETUP_TEXT =
  'The setup command\'s network: "none" (none at all), "allowlist" (HTTP and HTTPS to the hosts of "allow" only, through Errand\'s egress proxy), or "open" (any public address, never a private one or the worker\'s own).';
const COMMANDS_TEXT =
  'The network of the agent\'s run_command and of an engine\'s whole sandbox: "none" or "allowlist". An engine reaches its model through Errand either way.';
const ALLOW_TEXT = `The hosts "allowlist" lets through: "registry.example.com" (port 443 for HTTPS, 80 for plain HTTP), "*.example.com" (the names below it, not example.com itself), "host:port", or a preset (${Object.keys(NETWORK_PRESETS).join(', ')}). Loopback, private, link-local and reserved addresses are refused whatever a name resolves to.`;

const allow = z
  .array(z.string({ error: ALLOW }), { error: ALLOW })
  .max(ALLOW_MAX_PATTERNS, { error: ALLOW })
  .superRefine((patterns, ctx) => {
    patterns.forEach((pattern, at) => {
      const parsed = parsePattern(pattern);
      if ('error' in parsed) ctx.addIssue({ code: 'custom', path: [at], message: parsed.error });
    });
  });

/** The `network` field of a create or update body: each part may be given alone. */
export const networkField = z
  .strictObject(
    {
      setup: z.enum(SETUP_NETWORK_MODES, { error: SETUP }).optional().describe(SETUP_TEXT),
      commands: z
        .enum(COMMANDS_NETWORK_MODES, { error: COMMANDS })
        .optional()
        .describe(COMMANDS_TEXT),
      allow: allow.optional().describe(ALLOW_TEXT),
    },
    { error: (issue) => (issue.code === 'invalid_type' ? NETWORK : undefined) },
  )
  .describe(
    "What the project's commands may reach. Each part given is changed, the others kept (none, none and [] for a new project). Not together with setupNetwork.",
  );

/** The `network` of a project record. */
export const networkRecordField = z
  .object({
    setup: z.enum(SETUP_NETWORK_MODES).describe(SETUP_TEXT),
    commands: z.enum(COMMANDS_NETWORK_MODES).describe(COMMANDS_TEXT),
    allow: z.array(z.string()).describe(ALLOW_TEXT),
  })
  .describe("What the project's commands may reach.");

// The network policy as the admin API and the dashboard's forms take and show it: its shape, each
// refusal naming its field, and each pattern of the allowlist checked by the rules the egress
// proxy applies (network.ts), so that a bad one is a 400 naming it, never a run that fails later.
import { z } from 'zod';
import { COMMANDS_NETWORK_MODES, NETWORK_TEXTS, SETUP_NETWORK_MODES } from '../records/project.ts';
import { ALLOW_MAX_PATTERNS, parsePattern } from './network.ts';

const SETUP = `"network.setup" must be one of ${SETUP_NETWORK_MODES.join(', ')}`;
const COMMANDS = `"network.commands" must be one of ${COMMANDS_NETWORK_MODES.join(', ')}`;
const ALLOW = `"network.allow" must be a list of at most ${ALLOW_MAX_PATTERNS} patterns (strings)`;
const NETWORK = '"network" must be an object of "setup", "commands" and "allow", each optional';

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
      setup: z.enum(SETUP_NETWORK_MODES, { error: SETUP }).optional().describe(NETWORK_TEXTS.setup),
      commands: z
        .enum(COMMANDS_NETWORK_MODES, { error: COMMANDS })
        .optional()
        .describe(NETWORK_TEXTS.commands),
      allow: allow.optional().describe(NETWORK_TEXTS.allow),
    },
    { error: (issue) => (issue.code === 'invalid_type' ? NETWORK : undefined) },
  )
  .describe(
    "What the project's commands may reach. Each part given is changed, the others kept (none, none and [] for a new project). Not together with setupNetwork.",
  );

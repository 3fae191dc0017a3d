// The project secret record as the admin API returns it, declared once: the server's
// SecretRecord, the OpenAPI component Secret and the typed client's Secret. Never its value.
import { z } from 'zod';
import type { ProjectSecretRow } from '../db/schema.ts';

/**
 * Where a secret goes: setup (the setup and maintenance commands) or commands (also the agent's
 * commands and an engine's shell). Never a model.
 */
export const SECRET_EXPOSURES = ['setup', 'commands'] as const;

// The database's column says the same two (src/db/schema.ts).
SECRET_EXPOSURES satisfies readonly ProjectSecretRow['exposure'][];

export const secretRecord = z
  .object({
    name: z.string().describe('The environment variable commands read it from.'),
    exposure: z.enum(SECRET_EXPOSURES),
    createdAt: z.iso.datetime(),
    updatedAt: z.iso.datetime().describe('When its value and exposure were last set.'),
  })
  .meta({ id: 'Secret', description: 'A project secret, without its value.' });

export type SecretRecord = z.infer<typeof secretRecord>;
